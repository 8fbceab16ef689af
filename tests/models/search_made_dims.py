"""A decoder stacking attention weights over dims ops made (a strided valid `Conv1d`'s, which
has no frame for short sequences, and `max_pool`'s): a search returns the lengths of every dim
its results have."""

from netc import (
    Conv1d,
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    dot,
    end,
    full,
    max_pool,
    network,
    softmax,
    tanh,
)

time = Dim("time")
sub = Dim("sub")
pooled = Dim("pooled")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)


@network
def search_made_dims(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    enc = Conv1d(feat, 3, padding="valid", stride=2)(x, axis=time, out_axis=sub)
    pool = max_pool(x, axis=time, size=2, out_axis=pooled)
    label = full(batch, value=0, class_dim=vocab)
    labels, atts, pool_atts = [], [], []
    for _ in range(10):
        e = Embedding(feat)(label)
        att = softmax(dot(enc, e, reduce=feat), axis=sub)
        pool_att = softmax(dot(pool, e, reduce=feat), axis=pooled)
        ctx = dot(att, enc, reduce=sub) + dot(pool_att, pool, reduce=pooled)
        label = choice(Linear(vocab)(tanh(ctx + e)), target=y, beam=2)
        labels.append(label)
        atts.append(att)
        pool_atts.append(pool_att)
        if end(label == 0):
            break
    return {"labels": labels, "atts": atts, "pool_atts": pool_atts}

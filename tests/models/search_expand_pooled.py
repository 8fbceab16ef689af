"""A searched decoder whose step expands its state over a dim `max_pool` made: nothing else in
the loop reads the pooled encoder, so the expand itself must ask for the layer that gives the
dim its lengths (RETURNN: "dynamic dim 'pooled' undefined"); the encoder is an output only in training."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    argmax,
    batch,
    choice,
    end,
    expand,
    max_pool,
    network,
    reduce_sum,
    softmax,
    tanh,
    zeros,
)

time = Dim("time")
pooled = Dim("pooled")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)


@network
def search_expand_pooled(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    enc = max_pool(tanh(Linear(feat)(x)), axis=time, size=2, out_axis=pooled)
    s = zeros(batch, feat)
    label = argmax(zeros(batch, vocab), axis=vocab)
    labels = []
    for _ in range(x.max_seq_len):
        e = Embedding(feat)(label)
        grid = expand(s, pooled)  # [batch, feat, pooled]: the only use of `pooled` in the loop
        weights = softmax(reduce_sum(grid, axis=feat), axis=pooled)
        s = tanh(Linear(feat)(reduce_sum(weights * 2.0, axis=pooled) + e) + s)
        label = choice(Linear(vocab)(s), target=y, beam=2)
        labels.append(label)
        if end(label == 0):
            break
    return {"labels": labels, "enc": enc}

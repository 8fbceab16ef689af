"""A decoder with a constant bound (`range(4)`): verify draws its targets within it, and the
search scripts (its limit is not a Python bool combined with a tensor)."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    cross_entropy,
    end,
    full,
    mark_as_loss,
    network,
    reduce_mean,
    tanh,
)

enc_time = Dim("enc_time")
time = Dim("time")
vocab = Dim("vocab", 5)
hidden = Dim("hidden", 8)


@network
def search_const_bound(x: Tensor[batch, enc_time, hidden], y: Labels[batch, time, vocab]):
    c = reduce_mean(x, axis=enc_time)
    label = full(batch, value=0, class_dim=vocab)
    logits, labels = [], []
    for _ in range(4):
        scores = Linear(vocab)(tanh(Embedding(hidden)(label) + c))
        logits.append(scores)
        label = choice(scores, target=y, beam=2)
        labels.append(label)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels}

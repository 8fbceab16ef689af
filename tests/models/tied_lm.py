"""Tied parameters: a language model whose output layer's weight is its embedding's, transposed
(`Linear(vocab, weight=emb.weight)`, with a bias of its own), and an embedding that takes an
output layer's weight (the other way round); one variable each on every target."""

from netc import Dim, Embedding, Labels, Linear, batch, cross_entropy, mark_as_loss, network, tanh

time = Dim("time")
vocab = Dim("vocab", 7)
model = Dim("model", 5)
other = Dim("other", 4)


@network
def tied_lm(y: Labels[batch, time, vocab], z: Labels[batch, time, other]):
    emb = Embedding(model)
    h = tanh(emb(y))
    logits = Linear(vocab, weight=emb.weight)(h)  # emb.W [vocab, model] as [model, vocab]
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    proj = Linear(other, with_bias=False)
    back = proj(h)  # W [model, other]
    again = Embedding(model, weight=proj.weight)(z)  # proj.W as [other, model]
    return {"output": logits, "back": back, "again": again}

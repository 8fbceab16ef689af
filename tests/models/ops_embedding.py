"""Embedding on Labels: over the whole sequence and per step inside a loop (shared weights)."""

from netc import Dim, Embedding, Labels, Linear, batch, network, tanh, zeros

time = Dim("time")
vocab = Dim("vocab", 7)
emb = Dim("emb", 5)
hidden = Dim("hidden", 4)


@network
def embed(y: Labels[batch, time, vocab]):
    e = Embedding(emb)(y)
    h = zeros(batch, hidden)
    lookup = Embedding(emb)
    steps = []
    for y_t in y:
        e_t = lookup(y_t)
        h = tanh(Linear(hidden)(e_t) + h)
        steps.append(h)
    return {"output": e, "rnn": steps, "last": h}

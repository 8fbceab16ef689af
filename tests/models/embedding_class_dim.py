"""`Embedding(vocab)` of labels whose class dim is `vocab` (W [vocab, vocab]): of an input and,
in a loop, of the previous step's `argmax` over `vocab`."""

from netc import Dim, Embedding, Labels, Linear, argmax, batch, network, reduce_sum, tanh

time = Dim("time")
vocab = Dim("vocab", 5)


@network
def embed(y: Labels[batch, time, vocab]):
    e = Embedding(vocab)(y)
    label = argmax(reduce_sum(e, axis=time), axis=vocab)
    out = []
    for y_t in y:
        logits = tanh(Linear(vocab)(Embedding(vocab)(label)) + Embedding(vocab)(y_t))
        label = argmax(logits, axis=vocab)
        out.append(logits)
    return {"output": e, "steps": out}

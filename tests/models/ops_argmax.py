"""argmax over a static and over a dynamic dim; labels from argmax feed an Embedding."""

from netc import Dim, Embedding, Linear, Tensor, argmax, batch, network

time = Dim("time")
feat = Dim("feat", 6)
vocab = Dim("vocab", 9)
emb = Dim("emb", 3)


@network
def pick(x: Tensor[batch, time, feat]):
    logits = Linear(vocab)(x)
    best = argmax(logits, axis=vocab)
    frame = argmax(x, axis=time)
    return {"output": best, "frame": frame, "emb": Embedding(emb)(best)}

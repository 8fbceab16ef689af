"""`cast(labels, "int32", class_dim=...)`: labels read over another class dim (RETURNN's
`reinterpret_data` with `set_sparse_dim`, e.g. a transducer's labels with the blank masked away,
read by an embedding of the labels without it); outside a loop and in one, as a loop state."""

from netc import Dim, Embedding, Labels, Linear, Tensor, argmax, batch, cast, full, network, tanh, where

time = Dim("time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)  # the labels and a blank (4)
labels = Dim("labels", 4)  # the labels alone
emb = Dim("emb", 3)


@network
def cast_class_dim(x: Tensor[batch, time, feat], y: Labels[batch, time, vocab]):
    no_blank = cast(where(y == 4, 0, y), "int32", class_dim=labels)
    e = Embedding(emb)(no_blank)
    prev = full(batch, value=0, class_dim=labels)
    out = []
    for x_t in x:
        best = argmax(Linear(vocab)(tanh(Linear(feat)(x_t) + Embedding(feat)(prev))), axis=vocab)
        prev = cast(where(best == 4, prev, best), "int32", class_dim=labels)
        out.append(Embedding(emb)(prev))
    return {"output": e, "looped": out}

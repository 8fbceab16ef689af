"""`where` of labels and a number keeps the labels' class dim: RETURNN's `switch` checked the
number's dense constant against its sparse output and failed (now an `eval`); outside a loop, in a
loop and with the number first, the result read as labels by an `Embedding`."""

from netc import Dim, Embedding, Linear, Tensor, argmax, batch, network, tanh, where, zeros

time = Dim("time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)
emb = Dim("emb", 3)


@network
def where_labels_number(x: Tensor[batch, time, feat]):
    best = argmax(Linear(vocab)(x), axis=vocab)
    top = where(best != 4, best, 4)
    h = zeros(batch, emb)
    out = []
    for x_t in x:
        label = argmax(Linear(vocab)(concat_free(x_t, h)), axis=vocab)
        kept = where(label == 2, 0, label)
        h = tanh(Embedding(emb)(kept) + h)
        out.append(kept)
    return {"output": top, "looped": out, "h": h}


def concat_free(x_t, h):
    return tanh(Linear(feat)(x_t) + Linear(feat)(h))

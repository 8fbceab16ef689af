# diffgen seed 100069, shrunk by hand: without hoisting, a nested loop reads `p`, a part of a
# `split` in the outer step; collocating `p` with the nested loop kept it in the outer loop while
# RETURNN moved the split out, and `p` read `split/0` of a moved layer (KeyError). The nested loop
# reads a copy of `p` of its own, collocated with it.
from netc import Dim, Linear, Tensor, batch, network, reduce_mean, split, zeros

time = Dim("time")
enc = Dim("enc")
feat = Dim("feat", 6)
model = Dim("model", 5)
hidden = Dim("hidden", 4)


@network
def net(x: Tensor[time, batch, feat], e: Tensor[batch, enc, model]):
    h = zeros(batch, hidden)
    for x_t in x:
        p, _q = split(Linear(2 * feat)(x_t), 2)
        s = zeros(batch, feat)
        inner = []
        for e_t in e:
            s = Linear(feat)(e_t) + s + p
            inner.append(s)
        h = Linear(hidden)(reduce_mean(inner, axis=enc)) + h
    return {"output": h}

"""A value expanded in a loop that RETURNN moves out of it (it reads only the frame): its new dim
goes last both in the loop's template and over the stacked frames."""

import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 6)
hidden = nc.Dim("hidden", 6)
emb = nc.Dim("emb", 3)


@nc.network
def expand_moved_out(x: nc.Tensor[batch, time, feat]):
    s = nc.zeros(batch, hidden)
    out = []
    for x_t in x:
        grid = nc.reduce_max(nc.expand(s, emb) + nc.expand(nc.Linear(emb)(x_t), hidden), axis=hidden)
        s = nc.tanh(nc.Linear(hidden)(grid) + s)
        out.append(s)
    return {"out": out}

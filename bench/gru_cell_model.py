"""The benchmark GRU as a loop over netc's one-step `GruCell` op (torch's GRU cell), 80 -> 256."""

import netc as nc
from netc import Dim, Tensor, batch

time = Dim("time")
feat = Dim("feat", 80)
dim = Dim("dim", 256)


@nc.network
def gru_cell(x: Tensor[batch, time, feat]):
    cell = nc.GruCell(dim)
    h = nc.zeros(batch, dim)
    ys = []
    for x_t in x:
        h = cell(x_t, h)
        ys.append(h)
    return {"output": ys}

"""The benchmark LSTM as a loop over netc's one-step `LstmCell` op (`torch.lstm_cell` per step)."""

import netc as nc
from netc import Dim, Tensor, batch

time = Dim("time")
feat = Dim("feat", 80)
dim = Dim("dim", 256)


@nc.network
def lstm_cell(x: Tensor[batch, time, feat]):
    cell = nc.LstmCell(dim)
    h = nc.zeros(batch, dim)
    c = nc.zeros(batch, dim)
    ys = []
    for x_t in x:
        h, c = cell(x_t, (h, c))
        ys.append(h)
    return {"output": ys}

"""A whole-sequence LSTM (`Lstm`, RETURNN `nativelstm2`) between two projections."""

from netc import Dim, Linear, Lstm, Tensor, batch, network

time = Dim("time")
feat = Dim("feat", 5)
proj = Dim("proj", 4)
hidden = Dim("hidden", 6)
out = Dim("out", 3)


@network
def lstm(x: Tensor[batch, time, feat]):
    p = Linear(proj)(x)
    h = Lstm(hidden)(p)
    return {"output": Linear(out)(h), "hidden": h}

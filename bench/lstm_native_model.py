"""The benchmark model with netc's native whole-sequence `Lstm` op instead of a loop."""

import netc as nc
from netc import Dim, Tensor, batch

time = Dim("time")
feat = Dim("feat", 80)
dim = Dim("dim", 256)


@nc.network
def lstm_native(x: Tensor[batch, time, feat]):
    return {"output": nc.Lstm(dim)(x)}

"""A state concatenated with a value no step changes: RETURNN moves the concat after the loop,
where the state's frames have the loop's axis and the other value has not (without hoisting;
with it, netc moves the concat itself, the value expanded along the loop's axis)."""

import netc as nc
from netc import batch

time = nc.Dim("time")
enc = nc.Dim("enc")
feat = nc.Dim("feat", 4)
model = nc.Dim("model", 5)


@nc.network
def invariant_concat(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, enc, model]):
    summary = nc.reduce_sum(e, axis=enc)
    h = nc.zeros(batch, feat)
    out = []
    for x_t in x:
        h = nc.tanh(h + x_t)
        out.append(nc.concat(h, summary))
    return {"out": out}

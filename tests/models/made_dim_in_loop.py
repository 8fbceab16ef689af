"""In a loop over `time`, values over dims that ops made from `time` (`max_pool`, `pad_frames`, a
valid `Conv1d`) plus the step's state, stacked. RETURNN derives those ops' dims from `time` and
matches a derived dim with its base: the sum, moved out of the loop, took `time` and the pooled
dim as one axis (diffgen seed 50100); netc retags the ops' results to dims of their own."""

import netc as nc
from netc import batch

time = nc.Dim("time")
ptime = nc.Dim("ptime")
padded = nc.Dim("padded")
ctime = nc.Dim("ctime")
feat = nc.Dim("feat", 4)


@nc.network
def net(x: nc.Tensor[batch, time, feat]):
    pooled = nc.max_pool(x, axis=time, size=2, out_axis=ptime)
    pad = nc.pad_frames(x, axis=time, left=1, right=1, out_axis=padded)
    conv = nc.Conv1d(feat, filter_size=2, padding="valid", stride=2)(x, axis=time, out_axis=ctime)
    h = nc.zeros(batch, feat)
    a, b, c = [], [], []
    for x_t in x:
        h = nc.tanh(nc.Linear(feat)(x_t) + h)
        a.append(pooled + h)
        b.append(nc.tanh(pad * h))
        c.append(conv - h)
    return {"a": a, "b": b, "c": c}

"""A chunked loop whose output is averaged over the whole `time` after it: the mean needs every
chunk (it cannot stream), the per-frame output can."""

import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
hidden = nc.Dim("hidden", 5)
chunk = nc.Dim("chunk", 3)


@nc.network
def stream_chunk_whole(x: nc.Tensor[batch, time, feat]):
    h = nc.zeros(batch, hidden)
    frames = []
    for c in nc.chunks(x, chunk):
        e = nc.tanh(nc.Linear(hidden)(c) + h)
        h = nc.reduce_max(e, axis=chunk)
        frames.append(e)
    return {"frames": frames, "mean": nc.reduce_mean(frames, axis=time)}

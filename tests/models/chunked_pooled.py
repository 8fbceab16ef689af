"""A chunked loop over frames a pool makes (`max_pool` of pairs of input frames, as a streaming
encoder's front end subsamples): a chunk of 3 pooled frames is 6 input frames, each sequence's
last chunk shorter (its last pool window maybe a single frame). Streamed, a step takes 6 input
frames and pools them itself; per-frame outputs before the pool (over `time`) and after it."""

import netc as nc
from netc import batch

time = nc.Dim("time")
enc_time = nc.Dim("enc_time")
feat = nc.Dim("feat", 4)
hidden = nc.Dim("hidden", 5)
chunk = nc.Dim("chunk", 3)


@nc.network
def chunked_pooled(x: nc.Tensor[batch, time, feat]):
    proj = nc.tanh(nc.Linear(hidden)(x))
    pooled = nc.max_pool(proj, axis=time, size=2, out_axis=enc_time)
    h = nc.zeros(batch, hidden)
    frames = []
    for c in nc.chunks(pooled, chunk):
        e = nc.tanh(nc.Linear(hidden)(c) + nc.Linear(hidden)(h))
        w = nc.softmax(nc.reduce_sum(e, axis=hidden), axis=chunk)
        h = nc.tanh(nc.Linear(hidden)(nc.dot(w, e, reduce=chunk)) + h)
        frames.append(e)
    return {"frames": frames, "proj": proj, "h": h}

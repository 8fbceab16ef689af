"""A chunked loop carrying a state over a static window dim (a memory of `win` frames that each
chunk's frames attend over and that each chunk updates), and a per-frame Linear applied chunk by
chunk, which must equal the same Linear over the whole sequence (`per_frame` = `whole`)."""

import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
win = nc.Dim("win", 6)
chunk = nc.Dim("chunk", 4)


@nc.network
def chunked_window_state(x: nc.Tensor[batch, time, feat]):
    lin = nc.Linear(feat)
    mem = nc.zeros(batch, win, feat)
    per_frame = []
    attended = []
    for c in nc.chunks(x, chunk, axis=time):
        q = lin(c)
        att = nc.softmax(nc.dot(q, mem, reduce=feat), axis=win)
        attended.append(nc.dot(att, mem, reduce=win) + q)
        per_frame.append(q)
        mem = nc.tanh(0.5 * mem + nc.dot(att, c, reduce=chunk))
    nc.mark_as_loss(nc.reduce_sum(nc.reduce_sum(attended, axis=feat), axis=time), "attended_sum")
    return {"per_frame": per_frame, "whole": lin(x), "attended": attended, "mem": mem}

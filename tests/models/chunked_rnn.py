"""A chunked loop (`for c in chunks(x, chunk)`): each step a chunk of 3 frames, the last chunk of
a sequence shorter; a softmax and a sum over the chunk's frames (only its valid ones), a state
carried from chunk to chunk, an unrolled static range in the body, per-frame values stacked
back over `time` and a per-chunk summary stacked over the chunks' own dim."""

import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
hidden = nc.Dim("hidden", 5)
chunk = nc.Dim("chunk", 3)


@nc.network
def chunked_rnn(x: nc.Tensor[batch, time, feat]):
    h = nc.zeros(batch, hidden)
    frames = []
    summaries = []
    for c in nc.chunks(x, chunk):
        e = nc.tanh(nc.Linear(hidden)(c) + nc.Linear(hidden)(h))
        for _k in range(2):
            e = nc.tanh(nc.Linear(hidden)(e)) + e
        w = nc.softmax(nc.reduce_sum(e, axis=hidden), axis=chunk)
        h = nc.tanh(nc.Linear(hidden)(nc.dot(w, e, reduce=chunk)) + h)
        frames.append(e * h)
        summaries.append(nc.reduce_max(e, axis=chunk))
    loss = nc.reduce_sum(nc.reduce_sum(frames, axis=hidden), axis=time)
    nc.mark_as_loss(loss, "frames_sum")
    return {"frames": frames, "summaries": summaries, "h": h}

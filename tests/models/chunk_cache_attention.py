"""Limited-context attention run chunk by chunk with a carried cache (`join_chunk`,
`slice_static`, `to_chunk`): each chunk of 3 frames attends over itself and the 2 chunks before
(a cache of the last 6 frames and their validity), which must equal the whole-sequence form with
`chunk_mask` (`chunked` = `whole`); the chunk's frames taken back from the joined window equal
the input (`frames_back` = x)."""

import netc as nc
from netc import batch

time = nc.Dim("time")
kv_time = nc.Dim("kv_time")
feat = nc.Dim("feat", 4)
chunk = nc.Dim("chunk", 3)
win = nc.Dim("win", 6)  # the cache: 2 chunks of 3 frames
kv = nc.Dim("kv", 9)  # the cache and the chunk
frames = nc.Dim("frames", 3)


@nc.network
def chunk_cache_attention(x: nc.Tensor[batch, time, feat]):
    lin = nc.Linear(feat)
    cache = nc.zeros(batch, win, feat)
    valid = nc.full(batch, win, value=False, dtype="bool")
    chunked = []
    frames_back = []
    for c in nc.chunks(x, chunk):
        h = lin(c)
        keys = nc.join_chunk(cache, h, cache_axis=win, axis=chunk, out_axis=kv)
        ok = nc.join_chunk(
            valid, nc.full(batch, chunk, value=True, dtype="bool"), cache_axis=win, axis=chunk, out_axis=kv
        )
        e = nc.where(ok, nc.dot(h, keys, reduce=feat), -1e30)
        chunked.append(nc.dot(nc.softmax(e, axis=kv), keys, reduce=kv))
        frames_back.append(nc.to_chunk(nc.slice_static(keys, axis=kv, start=6, out_axis=frames), axis=frames, like=c))
        cache = nc.slice_static(keys, axis=kv, start=3, out_axis=win)
        valid = nc.slice_static(ok, axis=kv, start=3, out_axis=win)
    h = lin(x)
    h_kv = nc.replace_dim(h, axis=time, out_axis=kv_time)
    mask = nc.chunk_mask(query_axis=time, kv_axis=kv_time, chunk_size=3, left_chunks=2)
    e = nc.where(mask, nc.dot(h, h_kv, reduce=feat), -1e30)
    whole = nc.dot(nc.softmax(e, axis=kv_time), h_kv, reduce=kv_time)
    nc.mark_as_loss(nc.reduce_sum(nc.reduce_sum(chunked, axis=feat), axis=time), "chunked_sum")
    return {"chunked": chunked, "whole": whole, "frames_back": frames_back, "h": h}

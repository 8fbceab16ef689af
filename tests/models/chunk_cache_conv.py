"""A causal depthwise convolution run chunk by chunk: each chunk of 3 frames joined to a cache of
the 2 frames before it (`join_chunk`), a "valid" `Conv1d` over that static window (5 frames -> 3),
`to_chunk` back over the chunk; the cache the window's last 2 frames. It must equal the same
module's causal convolution over the whole sequence (`chunked` = `whole`), one parameter set."""

import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
chunk = nc.Dim("chunk", 3)
ctx = nc.Dim("ctx", 2)  # the filter's 3 frames - 1
window = nc.Dim("window", 5)  # the cache and the chunk
frames = nc.Dim("frames", 3)  # the convolution's results over the window: the chunk's


@nc.network
def chunk_cache_conv(x: nc.Tensor[batch, time, feat]):
    lin = nc.Linear(feat)
    conv = nc.Conv1d(feat, 3, padding="causal", groups=4)
    cache = nc.zeros(batch, ctx, feat)
    chunked = []
    for c in nc.chunks(x, chunk):
        joined = nc.join_chunk(cache, lin(c), cache_axis=ctx, axis=chunk, out_axis=window)
        chunked.append(nc.to_chunk(conv(joined, axis=window, out_axis=frames), axis=frames, like=c))
        cache = nc.slice_static(joined, axis=window, start=3, out_axis=ctx)
    whole = conv(lin(x), axis=time)
    nc.mark_as_loss(nc.reduce_sum(nc.reduce_sum(chunked, axis=feat), axis=time), "chunked_sum")
    return {"chunked": chunked, "whole": whole}

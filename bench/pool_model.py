"""Max-pooling over 2 frames with `max_pool` (bench_pool.py)."""

from netc import Dim, Tensor, batch, max_pool, network

time = Dim("time")
half_time = Dim("half_time")
feat = Dim("feat", 64)


@network
def pool(x: Tensor[batch, time, feat]):
    return max_pool(x, axis=time, size=2, out_axis=half_time)

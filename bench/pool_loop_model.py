"""Max-pooling over 2 frames without `max_pool` (bench_pool.py): the workaround netc models used
before, an `end` loop whose step j takes the max over all frames with window j's masked in,
O(frames^2)."""

from netc import Dim, Tensor, batch, end, network, reduce_max, reduce_sum, stack, where, zeros

time = Dim("time")
feat = Dim("feat", 64)


@network
def pool_loop(x: Tensor[batch, time, feat]):
    k = zeros(batch)
    positions = []
    for _x_t in x:  # 1, 2, 3, ... for each frame
        k = k + 1.0
        positions.append(k)
    pos = stack(positions)
    length = reduce_sum(pos * 0.0 + 1.0, axis=time)
    j = zeros(batch)
    pooled = []
    for _ in range(x.max_seq_len):
        j = j + 1.0
        in_window = where(pos > 2.0 * j - 2.0, pos <= 2.0 * j, pos < 0.0)
        pooled.append(reduce_max(where(in_window, x, -1e9), axis=time))
        if end(2.0 * j >= length):
            break
    return pooled

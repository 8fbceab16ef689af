"""`range_over` of a dynamic dim (an input's and one `max_pool` makes) and of a static dim, as
int and float: a sinusoidal positional encoding added to the frames, positions compared to a
number, a dynamic dim's positions reduced over its valid frames, and a static dim's expanded."""

from netc import (
    Dim,
    Linear,
    Tensor,
    batch,
    concat,
    cos,
    dot,
    exp,
    expand,
    max_pool,
    network,
    range_over,
    reduce_sum,
    sin,
    where,
)

time = Dim("time")
half_time = Dim("half_time")
feat = Dim("feat", 4)
half = Dim("half", 2)
LOG_STEP = -2.0 * 9.210340371976184 / 4  # -2 log(10000) / |feat|


def positional_encoding(x):
    pos = range_over(time, dtype="float32")  # [batch, time]: each sequence's positions
    inv_freq = exp(range_over(half, dtype="float32") * LOG_STEP)  # [half]
    angles = expand(pos, half) * inv_freq  # [batch, time, half]
    return concat(sin(angles), cos(angles))  # [batch, time, half+half]


@network
def positions(x: Tensor[batch, time, feat]):
    enc = Linear(half + half)(x) + positional_encoding(x)
    pooled = max_pool(x, axis=time, size=2, out_axis=half_time)
    idx = range_over(half_time)  # int [half_time]
    return {
        "output": enc,
        "early": where(idx < 2, reduce_sum(pooled, axis=feat), 0.0),  # [batch, half_time]
        "pos_sum": reduce_sum(range_over(time, dtype="float32"), axis=time),
        "positions": range_over(time),
        # a value without batch expanded (RETURNN's `expand_dims` counts an int axis batch-major)
        "grid": dot(x, expand(range_over(half, dtype="float32"), feat), reduce=feat),
    }

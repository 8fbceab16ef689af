"""Loops with `end` whose condition no step changes and whose appends stand after the `break`:
the emitter's flag of the ending step (`ended`, read after the loop) was a layer RETURNN moved
before the loop, without the time axis its last frame is taken along (an assertion in
`copy_with_time_dim_axis`). diffgen seeds 100 and 185 (`end_loop_after_nested_values.py`)."""

from netc import Dim, Linear, Tensor, batch, end, network, reduce_max, reduce_mean, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
half = Dim("half", 2)


@network
def end_invariant_appends_after(x: Tensor[batch, time, feat]):
    m = reduce_max(reduce_mean(x, axis=time), axis=feat)  # [batch], computed before the loops
    h = zeros(batch, feat)
    out = []
    for _ in range(x.max_seq_len):
        if end(m > 0.0):
            break
        out.append(h)
    z = zeros(batch, half)
    g_out = []
    for _ in range(5):
        g = tanh(Linear(half)(m * reduce_mean(x, axis=time)))
        if end(reduce_mean(g, axis=half) >= 0.0):
            break
        g_out.append(g)
        z = g * 2.0
    return {"out": out, "g_out": g_out, "z": z}

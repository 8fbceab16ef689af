"""diffgen seed 185, shrunk: an inner loop with one result (`s`), values read after their loops,
and a loop with `end` whose body no step changes, appending after its `break` (RETURNN: see
`end_invariant_appends_after.py`)."""

from netc import Dim, Labels, Linear, Tensor, batch, dot, end, network, reduce_max, reduce_mean

time = Dim("time")
feat = Dim("feat", 4)
lab_time = Dim("lab_time")
vocab = Dim("vocab", 3)
half = Dim("half", 2)


@network
def end_loop_after_nested_values(x: Tensor[batch, time, feat], y: Labels[batch, lab_time, vocab]):
    s0 = reduce_max(x, axis=time)
    for _t in range(y.max_seq_len):
        a = dot(x, x, reduce=time)
        s = s0
        for _x_t in x:
            s = a
    out = []
    for _ in range(x.max_seq_len):
        g = Linear(half)(s)
        if end(reduce_mean(g, axis=half) >= 0.5):
            break
        out.append(g)
    return {"o": out}

"""A loop with `end` nested in a loop over time whose state starts at zeros made in the outer
loop's step (with --no-hoist): RETURNN's first template of the inner state then has no batch dim
(the inner loop's lengths lost it: an assertion), so its initial value is a constant made at the
network's top. Found by the random-program generator (seed 42213)."""

import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 3)
hidden = nc.Dim("hidden", 6)


@nc.network
def net(x: nc.Tensor[batch, time, feat]):
    h = nc.zeros(batch, hidden)
    out = []
    for f in x:
        s = nc.zeros(batch, hidden)
        for _k in range(4):
            s = nc.Linear(hidden, with_bias=False)(s) + h + 0.5
            if nc.end(nc.reduce_sum(s, axis=hidden) > 0.0):
                break
        h = nc.Linear(hidden)(f) + h
        out.append(s)
    return {"out": out}

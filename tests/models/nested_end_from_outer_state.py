"""A loop with `end` nested in a loop over time, its state starting at the outer loop's state
before that step updates it (read through the state's `_prev` layer in RETURNN), its last value
stacked: the `_prev` layer's first template came from RETURNN's default zeros, which had no batch
dim, and the inner loop's lengths lost it too (an assertion). Found by the random-program
generator (seed 5023)."""

import netc as nc
from netc import batch

time = nc.Dim("time")
model = nc.Dim("model", 5)
hidden = nc.Dim("hidden", 6)


@nc.network
def net(e: nc.Tensor[batch, time, model]):
    h = nc.zeros(batch, hidden)
    out = []
    for f in e:
        s = h
        for _k in range(3):
            s = nc.tanh(nc.Linear(hidden, with_bias=False)(s) + h + 0.5)
            if nc.end(nc.reduce_sum(s, axis=hidden) > 0.5):
                break
        h = nc.tanh(nc.Linear(hidden)(f) + nc.Linear(hidden, with_bias=False)(h))
        out.append(s)
    return {"out": out}

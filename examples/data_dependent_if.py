"""`if` on one bool per sequence: both branches are computed, each sequence takes its own.

Inside the loop, a state update is accepted only where its energy is positive; after the
loop, the last state is scaled differently per sequence.
"""

from netc import Dim, Linear, Tensor, batch, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 8)
hidden = Dim("hidden", 10)


@network
def data_dependent_if(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        candidate = tanh(Linear(hidden)(x_t) + Linear(hidden, with_bias=False)(h))
        if reduce_sum(candidate, axis=hidden) > 0.0:
            h = candidate
        else:
            h = 0.5 * h
        out.append(h)
    if reduce_sum(h, axis=hidden) > 1.0:
        y = 2.0 * h
    else:
        y = -h
    return {"output": out, "last": h, "y": y}

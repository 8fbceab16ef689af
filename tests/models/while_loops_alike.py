"""Loops whose stacks eager mode cannot tell apart by their step dims: two `while True` loops, two
`range` loops with `end`, and a list read by an op rather than returned (eager mode once asked
the compiled graph, which has several loops stacking [batch, hidden])."""

from netc import Dim, Linear, Tensor, batch, end, network, reduce_sum, stack, tanh

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat]):
    h = reduce_sum(Linear(hidden)(x), axis=time)
    c = reduce_sum(h, axis=hidden)
    a = []
    while True:
        h = tanh(Linear(hidden)(h))
        a.append(h)  # eager mode: at the first step, made before the first `end(...)`
        c = c + 0.7
        if end(c > 2.0):
            break
    b = []
    g = h
    k = c
    while True:
        g = tanh(Linear(hidden)(g))
        k = k + 0.5
        if end(k > 4.0):
            break
        b.append(g)  # after the `break`: the ending step is not stacked
    d = []
    for _ in range(2 * x.max_seq_len):
        h = tanh(Linear(hidden)(h))
        d.append(h)
        c = c + 0.6
        if end(c > 5.0):
            break
    return {"a": stack(a) * 2.0, "b": stack(b) + 1.0, "d": reduce_sum(d, axis=hidden)}

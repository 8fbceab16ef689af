"""Loops with `end` whose appends stand after `if end(...): break` (the ending step is not stacked)
and values assigned before the `break` read after the loop: the ending step's (its states `h`, `k`
and `v`). RETURNN keeps no frame of the ending step without `include_eos`, so netc runs such a loop
with it and drops the ending step from the stacks. With verify's lengths 7, 6, 2: the bound stops
the first sequence (every step stacked), the condition holds at the bound's last step for the
second (that step not stacked), at the first step for the third (nothing stacked)."""

from netc import Dim, Linear, Tensor, batch, end, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat]):
    n = reduce_sum(reduce_sum(x * 0.0 + 1.0, axis=feat), axis=time)  # 4 per frame
    h = tanh(Linear(hidden)(reduce_sum(x, axis=time)))
    k = zeros(batch)
    y = h - 1.0
    out = []
    for _step in range(5):
        h = tanh(Linear(hidden)(h))
        k = k + 4.0
        v = h * 3.0
        if end(k > n - 6.0):  # at step 4 for length 6, at step 0 for length 2 or less
            break
        y = h * 2.0
        out.append(y)
    s = h
    c = reduce_sum(h, axis=hidden)
    out2 = []
    while True:
        s = tanh(Linear(hidden)(s))
        c = c + 0.7
        if end(c > 3.0):
            break
        out2.append(s * 2.0)
    return {"output": out, "h": h, "k": k, "v": v, "y": y, "out2": out2, "s": s, "c": c}

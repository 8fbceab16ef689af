"""A value assigned before and after the `break` of a loop with `end` (and not before the loop):
after the loop it is the ending step's value from before the `break` (a sequence that ends at its
first step, length 2 or less, has one), and the last step's from after it for a sequence stopped
by the bound (length 7)."""

from netc import Dim, Linear, Tensor, batch, end, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat]):
    n = reduce_sum(reduce_sum(x * 0.0 + 1.0, axis=feat), axis=time)  # 4 per frame
    h = tanh(Linear(hidden)(reduce_sum(x, axis=time)))
    k = zeros(batch)
    out = []
    for _step in range(5):
        h = tanh(Linear(hidden)(h))
        k = k + 4.0
        y = h + 1.0
        out.append(h)
        if end(k > n - 6.0):  # at step 1 when the length is 2 or less
            break
        y = h * 2.0
    return {"output": out, "y": y}

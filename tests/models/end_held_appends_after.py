"""A value bound before a loop with `end` and assigned after its `break`, the appends after it too
(the ending step is not stacked): after the loop it is the last stacked step's, its value before
the loop for a sequence that ends at its first step (stacking nothing: those of length 2 or
less), and its last step's for a sequence stopped by the bound (length 7)."""

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
        if end(k > n - 6.0):  # at step 1 when the length is 2 or less
            break
        y = h * 2.0
        out.append(y)
    return {"output": out, "y": y}

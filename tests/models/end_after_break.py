"""A `while True` loop whose appends stand after `if end(...): break`: the ending step is not stacked.
`y`, assigned after the `break`, is bound before the loop: a sequence ending at its first step keeps
that value."""

from netc import Dim, Linear, Tensor, batch, end, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    for x_t in x:
        h = tanh(Linear(hidden)(x_t) + h)
    s = h
    c = reduce_sum(h, axis=hidden)
    y = zeros(batch, hidden)
    out = []
    while True:
        s = tanh(Linear(hidden)(s))
        c = c + 0.7
        if end(c > 3.0):
            break
        y = s * 2.0
        out.append(y)
    return {"output": out, "y": y}

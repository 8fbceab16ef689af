"""A `while True` loop appending a value made in an earlier, finished loop: the list is stacked
over the `while` loop's steps, also when their count equals the earlier loop's."""

from netc import Dim, Tensor, batch, dot, end, network, softmax, tanh, zeros

time = Dim("time")
hidden = Dim("hidden", 4)


@network
def net(x: Tensor[batch, time, hidden]):
    h = zeros(batch, hidden)
    for f in x:
        w = softmax(dot(x, f, reduce=hidden), axis=time)
        h = tanh(dot(w, x, reduce=time) + h)
    n = zeros(batch)
    out = []
    while True:
        n = n + 1.0
        if end(n > 2.5):
            break
        out.append(h)
    return {"o0": out}

"""`expand` of a value over a dim an `end` loop made: eager mode keeps the value's own sizes (it
knows no length of such a dim outside the value; seed 14727 of the random-program tester)."""

from netc import Dim, Linear, Tensor, batch, end, expand, network, reduce_max, reduce_mean, stack, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def net(x: Tensor[batch, time, feat]):
    h = zeros(batch, feat)
    out = []
    for _ in range(3):
        h = tanh(Linear(feat)(h) + 0.5)
        out.append(h)
        if end(reduce_mean(h, axis=feat) > 0.2):
            break
    v = stack(out)
    w = tanh(Linear(hidden)(v))
    return {"o": reduce_max(expand(v, hidden) + expand(w, feat), axis=hidden)}

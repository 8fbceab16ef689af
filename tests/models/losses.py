"""Two losses (a per-frame one and a per-sequence one), summed over valid frames on every target."""

from netc import Dim, Linear, Tensor, batch, mark_as_loss, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        h = tanh(Linear(hidden)(x_t) + h)
        out.append(h)
    sq = reduce_sum(out, axis=hidden)
    mark_as_loss(sq * sq, "l2")
    mark_as_loss(reduce_sum(h, axis=hidden), "last")
    return out

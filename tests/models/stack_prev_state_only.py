"""Stacking a state before it is reassigned, where no frame shapes the state (its template comes
from its previous value): RETURNN stacks it after the loop along no time axis unless a layer
kept in the loop gives the previous value; also in a loop with `end`."""

from netc import Dim, Linear, Tensor, batch, end, network, reduce_max, reduce_sum, tanh, zeros

time = Dim("time")
hidden = Dim("hidden", 5)


@network
def net(x: Tensor[batch, time, hidden]):
    h = zeros(batch, hidden)
    a = []
    for _x_t in x:
        a.append(h)
        h = tanh(Linear(hidden)(h))
    g = reduce_max(x, axis=time)
    b = []
    for _s in range(5):
        b.append(g)
        g = tanh(Linear(hidden)(g))
        if end(reduce_sum(g, axis=hidden) > 0.5):
            break
    return {"a": a, "b": b}

"""`GruCell` (torch's GRU cell) with its input reading the loop state and its state read after
the loop; a cell whose input needs no loop state; a backward loop of cells."""

from netc import Dim, GruCell, Linear, Tensor, batch, concat, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def cells(x: Tensor[batch, time, feat]):
    h = tanh(Linear(hidden)(reduce_sum(x, axis=time)))
    g = zeros(batch, hidden)
    ys = []
    plain = []
    free = []
    fixed = []
    start = tanh(Linear(hidden)(reduce_sum(x, axis=time)))
    for x_t in x:
        h = GruCell(hidden)(concat(x_t, h), h)
        g = GruCell(hidden)(x_t, g)
        ys.append(h)
        plain.append(g)
        free.append(GruCell(hidden)(x_t, tanh(Linear(hidden)(x_t))))  # no loop state: may run outside
        fixed.append(GruCell(hidden)(start, tanh(Linear(hidden)(x_t))))
    b = zeros(batch, hidden)
    back = []
    for x_t in reversed(x):
        b = GruCell(hidden)(x_t, b)
        back.append(b)
    return {"output": ys, "last_h": h, "plain": plain, "back": back, "free": free, "fixed": fixed}

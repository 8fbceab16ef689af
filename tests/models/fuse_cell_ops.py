"""Loops of `LstmCell` and `GruCell` steps that `fuse_cells` makes native: an LSTM from zeros
(RETURNN's `nativelstm2`, the cell's forget bias added to its bias), a backward GRU from a
start state, an LSTM from a start state (RETURNN: the loop), their last states read."""

from netc import Dim, GruCell, Linear, LstmCell, Tensor, batch, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 5)
hidden = Dim("hidden", 4)


@network
def cell_loops(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    c = zeros(batch, hidden)
    ys = []
    for x_t in x:
        h, c = LstmCell(hidden)(x_t, (h, c))
        ys.append(h)
    start = tanh(Linear(hidden)(reduce_sum(x, axis=time)))
    g = start
    back = []
    for x_t in reversed(x):
        g = GruCell(hidden)(x_t, g)
        back.append(g)
    s, s_c = start, start
    for x_t in x:
        s, s_c = LstmCell(hidden)(x_t, (s, s_c))
    return {"output": ys, "last_h": h, "last_c": c, "back": back, "last_g": g, "s": s, "s_c": s_c}

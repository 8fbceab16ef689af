"""`LstmCell` (RETURNN `rnn_cell` LSTMBlock) with its input reading the loop state and its cell
state c read every step and after the loop; a backward `Lstm`; a cell whose input needs no loop
state (RETURNN may then run it outside the loop, which is fine when c is not read)."""

from netc import Dim, Linear, Lstm, LstmCell, Tensor, batch, concat, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def cells(x: Tensor[batch, time, feat]):
    back = Lstm(hidden, direction=-1)(x)
    h = tanh(Linear(hidden)(reduce_sum(x, axis=time)))
    c = zeros(batch, hidden) + 0.5
    g = zeros(batch, hidden)
    g_c = zeros(batch, hidden)
    ys = []
    cs = []
    plain = []
    for x_t in x:
        h, c = LstmCell(hidden)(concat(x_t, h), (h, c))
        g, g_c = LstmCell(hidden)(x_t, (g, g_c))
        ys.append(h)
        cs.append(c)
        plain.append(g)
    return {"output": ys, "cs": cs, "last_c": c, "back": back, "plain": plain}

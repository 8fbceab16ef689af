"""An `LstmCell` whose input is computed from its own state alone (no frame): RETURNN's
`rnn_cell` template has no batch dim then, so h gets a template of its own."""

from netc import Dim, Linear, LstmCell, Tensor, batch, network, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 6)


@network
def net(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    c = zeros(batch, hidden)
    hs = []
    for _x_t in x:
        h, c = LstmCell(hidden)(Linear(feat)(h), (h, c))
        hs.append(h)
    return {"last": h, "hs": hs}

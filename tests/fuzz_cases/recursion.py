"""A GRU whose step is a plain helper function (inlined at its call)."""

from netc import Dim, Linear, Tensor, batch, concat, network, sigmoid, split, tanh, zeros

time = Dim("time")
feat = Dim("feat", 24)
hidden = Dim("hidden", 16)


def gru_step(x, h):
    gates = sigmoid(Linear(2 * hidden)(concat(x, h)))
    r, z = split(gates, 2)
    cand = tanh(Linear(hidden)(concat(x, r * h)))
    return gru_step(x, (1.0 - z) * h + z * cand)


@network
def gru(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        h = gru_step(x_t, h)
        out.append(h)
    return {"output": out, "last": h}

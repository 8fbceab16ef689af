"""The benchmark model: the seed's plain-op LSTM at speech-model sizes."""

import netc as nc
from netc import Dim, Module, Tensor, batch

time = Dim("time")
feat = Dim("feat", 80)
dim = Dim("dim", 256)


class Lstm(Module):
    def __init__(self, out_dim):
        self.ff_linear = nc.Linear(4 * out_dim)
        self.rec_linear = nc.Linear(4 * out_dim, with_bias=False)

    def __call__(self, x, state):
        h, c = state
        x_in, g_in, g_forget, g_out = nc.split(self.ff_linear(x) + self.rec_linear(h), 4)
        c = c * nc.sigmoid(g_forget) + nc.tanh(x_in) * nc.sigmoid(g_in)
        h = nc.tanh(c) * nc.sigmoid(g_out)
        return h, (h, c)


@nc.network
def lstm(x: Tensor[batch, time, feat]):
    cell = Lstm(dim)
    h = nc.zeros(batch, dim)
    c = nc.zeros(batch, dim)
    ys = []
    for x_t in x:
        y, (h, c) = cell(x_t, (h, c))
        ys.append(y)
    return {"output": ys, "h": h}

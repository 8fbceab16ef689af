"""The benchmark GRU in plain ops, in torch's form (`nn.GRU`: r scales the recurrent projection
after its bias), 80 -> 256."""

import netc as nc
from netc import Dim, Module, Tensor, batch

time = Dim("time")
feat = Dim("feat", 80)
dim = Dim("dim", 256)


class Gru(Module):
    def __init__(self, out_dim):
        self.ff_linear = nc.Linear(3 * out_dim)
        self.rec_linear = nc.Linear(3 * out_dim)

    def __call__(self, x, h):
        x_r, x_z, x_n = nc.split(self.ff_linear(x), 3)
        h_r, h_z, h_n = nc.split(self.rec_linear(h), 3)
        r = nc.sigmoid(x_r + h_r)
        z = nc.sigmoid(x_z + h_z)
        n = nc.tanh(x_n + r * h_n)
        return (1.0 - z) * n + z * h


@nc.network
def gru(x: Tensor[batch, time, feat]):
    cell = Gru(dim)
    h = nc.zeros(batch, dim)
    ys = []
    for x_t in x:
        h = cell(x_t, h)
        ys.append(h)
    return {"output": ys, "h": h}

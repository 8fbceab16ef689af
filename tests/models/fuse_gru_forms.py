"""GRU loops in the form torch computes (r applied after the state's projection), which
fuse_cells makes one torch.gru call: as a Module, and backwards with z and 1 - z swapped and
the gate blocks in another order. RETURNN has no native unit with these numbers: the loops."""

import netc as nc
from netc import Dim, Module, Tensor, batch

time = Dim("time")
feat = Dim("feat", 6)
hid = Dim("hid", 5)


class Gru(Module):
    def __init__(self):
        self.x_proj = nc.Linear(3 * hid)
        self.h_proj = nc.Linear(3 * hid)

    def __call__(self, x, h):
        x_r, x_z, x_n = nc.split(self.x_proj(x), 3)
        h_r, h_z, h_n = nc.split(self.h_proj(h), 3)
        r = nc.sigmoid(x_r + h_r)
        z = nc.sigmoid(x_z + h_z)
        n = nc.tanh(x_n + r * h_n)
        return (1.0 - z) * n + z * h


@nc.network
def gru_forms(x: Tensor[batch, time, feat]):
    cell = Gru()
    h = nc.zeros(batch, hid)
    ys = []
    for x_t in x:
        h = cell(x_t, h)
        ys.append(h)

    hb = nc.zeros(batch, hid)
    back = []
    for x_t in reversed(x):
        x_n, x_z, x_r = nc.split(nc.Linear(3 * hid)(x_t), 3)
        h_z, h_n, h_r = nc.split(nc.Linear(3 * hid, with_bias=False)(hb), 3)
        r = nc.sigmoid(h_r + x_r)
        z = nc.sigmoid(x_z + h_z)
        n = nc.tanh(r * h_n + x_n)
        hb = (1.0 - z) * hb + z * n
        back.append(hb)
    return {"output": ys, "last": h, "backward": back, "last_backward": hb}

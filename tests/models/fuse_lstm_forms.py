"""LSTM loops fuse_cells makes native, in forms other than examples/lstm.py's: torch's gate
order (i, f, g, o) with a bias on both projections, as a helper; one kernel over concat(h, x) in
a backward loop; a state starting from the input (not zeros). RETURNN runs the first and the
last as the loops they are (no native unit with two biases or a given initial state)."""

import netc as nc
from netc import Dim, Tensor, batch

time = Dim("time")
feat = Dim("feat", 6)
hid = Dim("hid", 5)


def lstm_step(x, h, c):
    z = nc.Linear(4 * hid)(x) + nc.Linear(4 * hid)(h)
    i, f, g, o = nc.split(z, 4)
    c = nc.sigmoid(f) * c + nc.sigmoid(i) * nc.tanh(g)
    h = nc.sigmoid(o) * nc.tanh(c)
    return h, c


@nc.network
def lstm_forms(x: Tensor[batch, time, feat]):
    h = nc.zeros(batch, hid)
    c = nc.zeros(batch, hid)
    two_bias = []
    for x_t in x:
        h, c = lstm_step(x_t, h, c)
        two_bias.append(h)

    joint = nc.Linear(4 * hid)
    hb = nc.zeros(batch, hid)
    cb = nc.zeros(batch, hid)
    backward = []
    for x_t in reversed(x):
        o, g, f, i = nc.split(joint(nc.concat(hb, x_t)), 4)
        cb = cb * nc.sigmoid(f) + nc.tanh(g) * nc.sigmoid(i)
        hb = nc.tanh(cb) * nc.sigmoid(o)
        backward.append(hb)

    hs = nc.tanh(nc.Linear(hid)(nc.reduce_mean(x, axis=time)))
    cs = nc.zeros(batch, hid)
    started = []
    for x_t in x:
        hs, cs = lstm_step(x_t, hs, cs)
        started.append(hs)
    return {"two_bias": two_bias, "h": h, "c": c, "backward": backward, "hb": hb, "cb": cb, "started": started}

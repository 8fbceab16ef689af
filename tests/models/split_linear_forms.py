"""Linears over a concat of frames or invariants and the step's own values, which the
`split_linear` pass splits by the rows of their kernels (the first part then runs before the
loop): the frame first and a bias; the state first, over a backward loop; an invariant and
two frames as one run (concatenated on their own) with a stacked output; no bias. And two it
leaves whole: three runs (frame, state, frame), and a concat read twice."""

import netc as nc
from netc import Dim, Tensor, batch

time = Dim("time")
feat = Dim("feat", 6)
aux = Dim("aux", 3)
hid = Dim("hid", 5)


@nc.network
def split_forms(x: Tensor[batch, time, feat], a: Tensor[batch, time, aux]):
    h = nc.zeros(batch, hid)
    for x_t in x:
        h = nc.tanh(nc.Linear(hid)(nc.concat(x_t, h)))

    hb = nc.zeros(batch, hid)
    backward = []
    for x_t in reversed(x):
        hb = nc.tanh(nc.Linear(hid)(nc.concat(hb, x_t)))
        backward.append(hb)

    summary = nc.tanh(nc.Linear(hid)(nc.reduce_mean(x, axis=time)))
    hs = nc.zeros(batch, hid)
    runs = []
    for x_t, a_t in zip(x, a):
        hs = nc.sigmoid(nc.Linear(hid, with_bias=False)(nc.concat(summary, x_t, a_t, hs)))
        runs.append(hs)

    hw = nc.zeros(batch, hid)
    kept = []
    for x_t, a_t in zip(x, a):
        both = nc.concat(x_t, hw)  # read twice: stays whole
        twice = nc.Linear(hid)(nc.concat(hw, x_t, hw))  # the state in two runs: stays whole
        hw = nc.tanh(nc.Linear(hid)(nc.concat(x_t, hw, a_t)) + nc.Linear(hid)(both) + twice)
        kept.append(nc.Linear(hid)(both))
    return {"h": h, "backward": backward, "runs": runs, "kept": kept, "hw": hw}

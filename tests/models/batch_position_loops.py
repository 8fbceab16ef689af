"""Inputs with batch at every position (docs/language.md: "`batch` may stand anywhere in the
annotation"), each stepped over by a loop that gives a value read after it, a stack and a state.
RETURNN took the last frame of a layer it moved out of the loop batch-major but labelled it with
the layer's template, which had a dim before batch: `a2` came out transposed (wrong numbers, no
error, with feat and batch of one size). Its config now reads each input in netc's own order."""

from netc import Dim, Tensor, batch, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 3)


def results(x):
    h = zeros(batch, feat)
    out = []
    for x_t in x:
        a = tanh(x_t)  # read after the loop: each sequence's last frame
        h = tanh(x_t + 0.5 * h)
        out.append(2.0 * x_t)
    return a, out, h


@network
def batch_position_loops(
    x0: Tensor[batch, time, feat],
    x1: Tensor[time, batch, feat],
    x2: Tensor[time, feat, batch],
    x3: Tensor[feat, batch, time],
    x4: Tensor[feat, time, batch],
    x5: Tensor[batch, feat, time],
):
    a0, out0, h0 = results(x0)
    a1, out1, h1 = results(x1)
    a2, out2, h2 = results(x2)
    a3, out3, h3 = results(x3)
    a4, out4, h4 = results(x4)
    a5, out5, h5 = results(x5)
    return {
        "a0": a0, "out0": out0, "h0": h0,
        "a1": a1, "out1": out1, "h1": h1,
        "a2": a2, "out2": out2, "h2": h2,
        "a3": a3, "out3": out3, "h3": h3,
        "a4": a4, "out4": out4, "h4": h4,
        "a5": a5, "out5": out5, "h5": h5,
    }  # fmt: skip

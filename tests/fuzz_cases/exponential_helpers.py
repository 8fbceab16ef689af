"""A GRU whose step is a plain helper function (inlined at its call)."""

from netc import Dim, Linear, Tensor, batch, concat, network, sigmoid, split, tanh, zeros

time = Dim("time")
feat = Dim("feat", 24)
hidden = Dim("hidden", 16)


def gru_step(x, h):
    gates = sigmoid(Linear(2 * hidden)(concat(x, h)))
    r, z = split(gates, 2)
    cand = tanh(Linear(hidden)(concat(x, r * h)))
    return (1.0 - z) * h + z * cand


def g0(x):
    return tanh(x)


def g1(x):
    return g0(g0(x))


def g2(x):
    return g1(g1(x))


def g3(x):
    return g2(g2(x))


def g4(x):
    return g3(g3(x))


def g5(x):
    return g4(g4(x))


def g6(x):
    return g5(g5(x))


def g7(x):
    return g6(g6(x))


def g8(x):
    return g7(g7(x))


def g9(x):
    return g8(g8(x))


def g10(x):
    return g9(g9(x))


def g11(x):
    return g10(g10(x))


def g12(x):
    return g11(g11(x))


def g13(x):
    return g12(g12(x))


def g14(x):
    return g13(g13(x))


def g15(x):
    return g14(g14(x))


def g16(x):
    return g15(g15(x))


def g17(x):
    return g16(g16(x))


def g18(x):
    return g17(g17(x))


def g19(x):
    return g18(g18(x))


def g20(x):
    return g19(g19(x))


def g21(x):
    return g20(g20(x))


def g22(x):
    return g21(g21(x))


def g23(x):
    return g22(g22(x))


def g24(x):
    return g23(g23(x))


def g25(x):
    return g24(g24(x))


def g26(x):
    return g25(g25(x))


def g27(x):
    return g26(g26(x))


def g28(x):
    return g27(g27(x))


def g29(x):
    return g28(g28(x))


def g30(x):
    return g29(g29(x))


@network
def gru(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        h = gru_step(x_t, h)
        out.append(h)
    return {"output": out, "last": g30(h)}

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


def g0(n):
    return n


def g1(n):
    return g0(n) + g0(n) - n


def g2(n):
    return g1(n) + g1(n) - n


def g3(n):
    return g2(n) + g2(n) - n


def g4(n):
    return g3(n) + g3(n) - n


def g5(n):
    return g4(n) + g4(n) - n


def g6(n):
    return g5(n) + g5(n) - n


def g7(n):
    return g6(n) + g6(n) - n


def g8(n):
    return g7(n) + g7(n) - n


def g9(n):
    return g8(n) + g8(n) - n


def g10(n):
    return g9(n) + g9(n) - n


def g11(n):
    return g10(n) + g10(n) - n


def g12(n):
    return g11(n) + g11(n) - n


def g13(n):
    return g12(n) + g12(n) - n


def g14(n):
    return g13(n) + g13(n) - n


def g15(n):
    return g14(n) + g14(n) - n


def g16(n):
    return g15(n) + g15(n) - n


def g17(n):
    return g16(n) + g16(n) - n


def g18(n):
    return g17(n) + g17(n) - n


def g19(n):
    return g18(n) + g18(n) - n


def g20(n):
    return g19(n) + g19(n) - n


def g21(n):
    return g20(n) + g20(n) - n


def g22(n):
    return g21(n) + g21(n) - n


def g23(n):
    return g22(n) + g22(n) - n


def g24(n):
    return g23(n) + g23(n) - n


def g25(n):
    return g24(n) + g24(n) - n


def g26(n):
    return g25(n) + g25(n) - n


def g27(n):
    return g26(n) + g26(n) - n


def g28(n):
    return g27(n) + g27(n) - n


def g29(n):
    return g28(n) + g28(n) - n


def g30(n):
    return g29(n) + g29(n) - n

N = g30(1)

@network
def gru(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        h = gru_step(x_t, h)
        out.append(h)
    return {"output": out, "last": h}

"""Modules whose results nothing reads: the compiler drops their parameters, eager mode still runs them."""

from netc import Dim, Linear, Module, Tensor, batch, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


class Cell(Module):
    def __init__(self):
        self.inp = Linear(hidden)
        self.rec = Linear(hidden, with_bias=False)

    def __call__(self, x_t, h):
        return tanh(self.inp(x_t) + self.rec(h))


@network
def f(x: Tensor[batch, time, feat]):
    Linear(hidden)(x)  # an expression statement: its value is dropped
    h = zeros(batch, hidden)
    unused = Cell()
    out = []
    for x_t in x:
        Linear(hidden)(x_t)
        dead = unused(x_t, h)  # noqa: F841 - assigned, never read
        h = tanh(Linear(hidden)(x_t) + h)
        out.append(h)
    return {"output": out}

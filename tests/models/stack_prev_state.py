"""The first step appends the state's value from before the loop (a shifted sequence)."""

from netc import Dim, Linear, Tensor, batch, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 5)


@network
def preappend(x: Tensor[batch, time, feat]):
    h = zeros(batch, feat)
    ys = []
    for x_t in x:
        ys.append(h)  # the previous step's state: zeros at the first step
        h = tanh(Linear(feat)(x_t) + h)
    return {"output": ys, "last": h}

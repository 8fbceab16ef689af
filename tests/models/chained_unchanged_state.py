"""A state two loops carry without changing it: after rec_state, the second loop starts from the
first one's result, which is itself renamed to the value before both (renames chain)."""

from netc import Dim, Linear, Tensor, batch, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 3)


@network
def chain(x: Tensor[batch, time, feat]):
    a = tanh(Linear(feat)(zeros(batch, feat)))
    ys = []
    for x_t in x:
        a = a
        ys.append(x_t + a)
    zs = []
    for x_t in x:
        a = a
        zs.append(x_t * a)
    return {"ys": ys, "zs": zs, "a": a}

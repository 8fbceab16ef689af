"""Eager mode finds the loop a list was stacked in by the list's name when its items say nothing
(a value made before the loop, appended at every step) and two loops stack such values over the
same number of steps (diffgen seed 17: a forward and a backward loop over `time`)."""

from netc import Dim, Linear, Tensor, batch, network, reduce_sum, stack, tanh

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat]):
    h = tanh(Linear(hidden)(reduce_sum(x, axis=time)))
    same = []
    for _x_t in x:
        same.append(h)
    back = []
    for x_t in reversed(x):
        back.append(tanh(Linear(hidden)(x_t)))
    return {"same": stack(same) * 2.0, "back": back}

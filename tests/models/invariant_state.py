"""A state whose next value no step changes: its previous value is read in the loop, its last
value after it."""

from netc import Dim, Linear, Tensor, batch, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 5)


@network
def invariant_state(x: Tensor[batch, time, feat]):
    m = reduce_sum(x, axis=time)
    h = zeros(batch, feat)
    ys = []
    for x_t in x:
        ys.append(tanh(x_t + h))
        h = tanh(Linear(feat)(m))
    return {"output": ys, "h": h}

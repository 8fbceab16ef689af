"""Loop-invariant values stacked and read after a loop: one from before the loop, one the body
computes from invariants only (it stays in the loop without hoisting). RETURNN moves a layer
that no step changes out of its loop, where it has no time axis to stack or take a last frame of."""

from netc import Dim, Linear, Tensor, batch, network, reduce_sum, tanh

time = Dim("time")
feat = Dim("feat", 5)


@network
def invariant_results(x: Tensor[batch, time, feat]):
    m = reduce_sum(x, axis=time)
    v = tanh(m)
    out = []
    inv = []
    for _x_t in x:
        w = tanh(Linear(feat)(m))
        out.append(w)
        inv.append(v)
    return {"output": out, "inv": inv, "w": w}

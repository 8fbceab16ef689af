"""`dot` whose operands each keep a static dim of their own, the two of one size: RETURNN's `dot`
with `var1`/`var2` "auto" (behavior version < 14) matches two static dims of one size as one
dim (kept, not multiplied out), so netc names each operand's own dims (a window of 3 frames of
3 features, as an imported `window` layer computes it)."""

from netc import Dim, Linear, Tensor, batch, dot, network

time = Dim("time")
feat = Dim("feat", 3)
win = Dim("win", 3)


@network
def dot_own_dims_one_size(x: Tensor[batch, time, feat]):
    a = Linear(win)(x)
    return {"output": dot(a, x, reduce=time)}

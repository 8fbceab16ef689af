"""A `return` in one branch of an `if` on a tensor was taken whatever the condition."""

from netc import Dim, Tensor, batch, network, reduce_sum, tanh

time = Dim("time")
feat = Dim("feat", 4)


@network
def f(x: Tensor[batch, time, feat]):
    if reduce_sum(x, axis=[time, feat]) > 0.0:
        return tanh(x)
    return x

"""A `BatchNorm(update_in_inference=True)` (the whole batch's statistics) whose result nothing
reads: the compiled graph drops it, but eager mode runs every call the source makes and cannot run
it one sequence at a time, so `netc verify` takes torch as the reference (found by the random-program
generator, seed 58811: eager was asked and refused)."""

from netc import BatchNorm, Conv1d, Dim, Linear, Tensor, batch, network, tanh

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 5)


@network
def bn_unused(x: Tensor[batch, time, feat]):
    h = Conv1d(feat, filter_size=3, groups=4)(x, axis=time)
    BatchNorm(update_in_inference=True)(h)
    return {"output": tanh(Linear(hidden)(h))}

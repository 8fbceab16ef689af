"""`BatchNorm` in inference (what `netc verify` runs): the running statistics, over [batch,
time, feature] and [batch, feature]; with the Conformer conv module's order (depthwise conv,
batch norm, swish)."""

from netc import BatchNorm, Conv1d, Dim, Linear, Tensor, batch, network, reduce_sum, swish

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 5)


@network
def bn(x: Tensor[batch, time, feat]):
    h = Conv1d(feat, filter_size=3, groups=4)(x, axis=time)
    y = swish(BatchNorm()(h))
    pooled = BatchNorm(eps=1e-5, momentum=0.01)(reduce_sum(Linear(hidden)(y), axis=time))
    return {"output": y, "pooled": pooled}

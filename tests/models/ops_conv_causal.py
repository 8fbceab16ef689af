"""`Conv1d` with padding "causal": (k-1)*dilation zero frames on the left only, so frame t reads
frames up to t (a streaming encoder's convolution); depthwise, dilated, grouped without bias,
and a filter of one frame."""

from netc import Conv1d, Dim, Linear, Tensor, batch, network, silu

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 6)


@network
def conv_causal(x: Tensor[batch, time, feat]):
    h = silu(Linear(hidden)(x))
    depth = Conv1d(hidden, filter_size=3, padding="causal", groups=6)(h, axis=time)
    dilated = Conv1d(hidden, filter_size=4, padding="causal", dilation=2)(depth, axis=time)
    grouped = Conv1d(hidden, filter_size=2, padding="causal", groups=2, with_bias=False)(x, axis=time)
    one = Conv1d(feat, filter_size=1, padding="causal")(x, axis=time)
    return {"output": dilated, "grouped": grouped, "one": one}

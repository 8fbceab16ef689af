"""`Conv1d` over a padded batch: 'same' padding (odd and even filters, dilation, depthwise
groups, no bias), 'valid' padding with a stride (a new dynamic dim and its lengths, a loop over
it; depthwise with a dilation too), and `silu`, `swish`, `glu` (the Conformer's conv module)."""

from netc import Conv1d, Dim, Linear, Tensor, batch, glu, network, reduce_sum, silu, swish, zeros

time = Dim("time")
sub = Dim("sub")
sub2 = Dim("sub2")
feat = Dim("feat", 4)
hidden = Dim("hidden", 6)
double = Dim("double", 12)


@network
def conv(x: Tensor[batch, time, feat]):
    h = glu(Linear(double)(x), hidden)
    depth = Conv1d(hidden, filter_size=3, groups=6)(h, axis=time)
    even = Conv1d(hidden, filter_size=4, dilation=2, with_bias=False)(silu(depth), axis=time)
    grouped = Conv1d(hidden, filter_size=2, groups=2)(swish(x), axis=time)
    strided = Conv1d(hidden, filter_size=3, padding="valid", stride=2)(even, axis=time, out_axis=sub)
    # TF's depthwise convolution with a stride and a dilation: RETURNN's layer gives wrong frames
    dilated = Conv1d(hidden, filter_size=3, groups=6, padding="valid", stride=2, dilation=2)(
        h, axis=time, out_axis=sub2
    )
    acc = zeros(batch, hidden)
    for s_t in strided:
        acc = acc + reduce_sum(s_t, axis=hidden) * s_t
    return {"output": even, "grouped": grouped, "strided": strided, "acc": acc, "dilated": dilated}

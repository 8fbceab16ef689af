"""`Conv2d` with strides and "valid" padding: a time stride with padding "same" (each sequence's
own padding, from its own length: odd and even filters, odd and even lengths), "valid" with
strides (sequences shorter than the filter get no frame), a feature stride with "same", and a
loop over a strided result."""

from netc import Conv2d, Dim, Tensor, batch, expand, network, reduce_sum, relu, zeros

time = Dim("time")
sub3 = Dim("sub3")
sub4 = Dim("sub4")
valid = Dim("valid")
valid2 = Dim("valid2")
feat = Dim("feat", 7)
f4 = Dim("f4", 4)
f3 = Dim("f3", 3)
f2 = Dim("f2", 2)
f6 = Dim("f6", 6)
one = Dim("one", 1)
chan = Dim("chan", 4)
out = Dim("out", 2)


@network
def strided(x: Tensor[batch, time, feat]):
    c = expand(x, one)
    h = relu(Conv2d(chan, filter_size=(3, 3), stride=(1, 2))(c, axis=time, feature_axis=feat, out_feature_axis=f4))
    s3 = Conv2d(out, filter_size=(3, 2), stride=(2, 1))(h, axis=time, feature_axis=f4, out_axis=sub3)
    s4 = Conv2d(out, filter_size=(4, 3), stride=(3, 2), groups=2)(
        h, axis=time, feature_axis=f4, out_axis=sub4, out_feature_axis=f2
    )
    v = Conv2d(out, filter_size=(3, 2), padding="valid", stride=2)(
        h, axis=time, feature_axis=f4, out_axis=valid, out_feature_axis=f2
    )
    v1 = Conv2d(chan, filter_size=(2, 2), padding="valid", with_bias=False)(
        c, axis=time, feature_axis=feat, out_axis=valid2, out_feature_axis=f6
    )
    acc = zeros(batch, f4, out)
    for s_t in s3:
        acc = acc + reduce_sum(s_t, axis=out) * s_t
    return {"output": s3, "s4": s4, "valid": v, "valid1": v1, "acc": acc}

"""`Conv2d` over (time, feature) with channels, as ConformerConvSubsample's front end: channels
split off the features, two 'same' convolutions (odd and even filters, groups), a max pool of 2
over the feature dim (`split_dims` + `reduce_max`), the feature and channel dims merged, then a
time `max_pool`; a
convolution over the channel dim as feature axis, into a dim declared before the others."""

from netc import Conv2d, Dim, Tensor, batch, max_pool, merge_dims, network, reduce_max, relu, split_dims

time = Dim("time")
half_time = Dim("half_time")
early = Dim("early", 3)  # declared first: the result's dims in another order than the input's
feat = Dim("feat", 8)
fhalf = Dim("fhalf", 4)
pair = Dim("pair", 2)
chan = Dim("chan", 4)
out = Dim("out", 2)
fq = Dim("fq", 2)
merged = Dim("merged", 4)


@network
def subsample(x: Tensor[batch, time, feat]):
    c = split_dims(x, axis=feat, dims=(fhalf, pair))
    h = relu(Conv2d(chan, filter_size=(3, 2))(c, axis=time, feature_axis=fhalf))
    h = Conv2d(out, filter_size=(2, 3), groups=2)(h, axis=time, feature_axis=fhalf)
    swapped = Conv2d(early, filter_size=(1, 3), with_bias=False)(h, axis=time, feature_axis=out)
    pooled = reduce_max(split_dims(h, axis=fhalf, dims=(fq, pair)), axis=pair)
    flat = merge_dims(pooled, dims=(fq, out), out_dim=merged)
    return {"output": h, "swapped": swapped, "pooled": max_pool(flat, axis=time, size=2, out_axis=half_time)}

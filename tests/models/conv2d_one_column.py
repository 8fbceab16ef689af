"""`Conv2d` with a feature stride and one window over the features, on one input channel: torch
2.13's and TensorFlow's oneDNN float32 convolutions compute wrong numbers for it (the channel's
strides read as channels-last). Eager mode and the torch module convolve at feature stride 1 (the
same window); RETURNN's layer convolves at feature stride 1 and slices that window's column.
Found by the random-program generator (torch: seed 920058; TensorFlow: seed 45021, layer `c`)."""

import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 3)
feat4 = nc.Dim("feat4", 4)
hidden = nc.Dim("hidden", 6)
model = nc.Dim("model", 5)
one = nc.Dim("one", 1)
c2time = nc.Dim("c2time")
c2feat = nc.Dim("c2feat", 1)
c3feat = nc.Dim("c3feat", 1)
c3time = nc.Dim("c3time")
c4feat = nc.Dim("c4feat", 1)
c4time = nc.Dim("c4time")
c5feat = nc.Dim("c5feat", 1)
c5time = nc.Dim("c5time")


@nc.network
def net(x: nc.Tensor[batch, time, feat], z: nc.Tensor[batch, time, feat4]):
    conv = nc.Conv2d(hidden, filter_size=(3, 3), stride=(1, 2), padding="valid")
    a = conv(nc.expand(x, one), axis=time, feature_axis=feat, out_axis=c2time, out_feature_axis=c2feat)
    conv2 = nc.Conv2d(hidden, filter_size=(1, 2), stride=(1, 3), padding="valid")
    b = conv2(nc.expand(z, one), axis=time, feature_axis=feat4, out_axis=c3time, out_feature_axis=c3feat)
    conv3 = nc.Conv2d(model, filter_size=(4, 3), stride=(1, 2), padding="valid")
    c = conv3(nc.expand(z, one), axis=time, feature_axis=feat4, out_axis=c4time, out_feature_axis=c4feat)
    # "same" with both strides: one window over 3 features at feature stride 3, its column 1 at stride 1
    conv4 = nc.Conv2d(model, filter_size=(2, 4), stride=(2, 3))
    d = conv4(nc.expand(x, one), axis=time, feature_axis=feat, out_axis=c5time, out_feature_axis=c5feat)
    return {"a": a, "b": b, "c": c, "d": d}

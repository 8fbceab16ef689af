"""`Conv2d` with a feature stride and one window over the features, on one input channel: torch
2.13's oneDNN float convolution computed wrong numbers for it (the channel's strides read as
channels-last); eager mode and the torch module convolve at feature stride 1 (the same window).
Found by the random-program generator (seed 920058). TensorFlow's oneDNN convolution has the same
fault (RETURNN is not compared: tests/test_models.py)."""

import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 3)
feat4 = nc.Dim("feat4", 4)
hidden = nc.Dim("hidden", 6)
one = nc.Dim("one", 1)
c2time = nc.Dim("c2time")
c2feat = nc.Dim("c2feat", 1)
c3feat = nc.Dim("c3feat", 1)
c3time = nc.Dim("c3time")


@nc.network
def net(x: nc.Tensor[batch, time, feat], z: nc.Tensor[batch, time, feat4]):
    conv = nc.Conv2d(hidden, filter_size=(3, 3), stride=(1, 2), padding="valid")
    a = conv(nc.expand(x, one), axis=time, feature_axis=feat, out_axis=c2time, out_feature_axis=c2feat)
    conv2 = nc.Conv2d(hidden, filter_size=(1, 2), stride=(1, 3), padding="valid")
    b = conv2(nc.expand(z, one), axis=time, feature_axis=feat4, out_axis=c3time, out_feature_axis=c3feat)
    return {"a": a, "b": b}

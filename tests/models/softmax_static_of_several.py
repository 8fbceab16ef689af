"""softmax and log_softmax over one of two static dims (RETURNN: an `eval` naming the axis, its
softmax activation acting on the feature dim only), over each of them."""

import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 3)
hidden = nc.Dim("hidden", 5)


@nc.network
def softmax_static_of_several(x: nc.Tensor[batch, time, feat]):
    y = nc.expand(nc.Linear(hidden)(x), feat) + nc.expand(x, hidden)  # [batch, time, feat, hidden]
    return {
        "over_hidden": nc.softmax(y, axis=hidden),
        "over_feat": nc.log_softmax(y, axis=feat),
    }

# diffgen seeds 21006, 21048 (green): a sequence with no frame on a dim a valid Conv1d made (here
# the one of 4 frames, shorter than the filter's span 5): RETURNN's softmax_over_spatial is NaN
# there but marks the padding as zeros, so the dot over that dim skipped its mask (eager, torch: 0)
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
ctime = nc.Dim("ctime")


@nc.network
def net(x: nc.Tensor[batch, time, feat]):
    v2 = nc.Conv1d(feat, filter_size=3, dilation=2, padding="valid", stride=3)(x, axis=time, out_axis=ctime)
    h = nc.reduce_sum(x, axis=time)
    w = nc.softmax(nc.dot(v2, h, reduce=feat), axis=ctime)
    return {"w": nc.dot(w, v2, reduce=ctime), "s": nc.reduce_sum(v2, axis=ctime)}

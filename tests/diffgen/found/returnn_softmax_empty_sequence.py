# diffgen seeds 21006, 21048 (green), shrunk by hand: mismatch returnn (inf): a sequence with no frames on a dim a valid Conv1d (or slice_frames) made: RETURNN's softmax_over_spatial gives NaN at all its (padded) frames but marks the padding as 0, so the dot over that dim skips its mask (eager and torch: 0)
import netc as nc
from netc import batch
time = nc.Dim('time')
feat = nc.Dim('feat', 4)
ctime = nc.Dim('ctime')

@nc.network
def net(x: nc.Tensor[batch, time, feat]):
    v2 = nc.Conv1d(feat, filter_size=3, dilation=2, padding='valid', stride=3)(x, axis=time, out_axis=ctime)
    h = nc.reduce_sum(x, axis=time)
    w = nc.softmax(nc.dot(v2, h, reduce=feat), axis=ctime)
    return {'w': nc.dot(w, v2, reduce=ctime), 's': nc.reduce_sum(v2, axis=ctime)}

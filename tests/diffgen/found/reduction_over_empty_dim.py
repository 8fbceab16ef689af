# diffgen seed 24109 (green), fixed: logsumexp over a dim a valid Conv1d made, a sequence with no frame on it: eager, torch and RETURNN disagreed (-inf, nan, inf) and eager reduce_max failed (amax of no element). Every reduction over no frame is now 0 on every target (tests/test_empty_reductions.py).
import netc as nc
from netc import batch
time = nc.Dim('time')
feat = nc.Dim('feat', 4)
model = nc.Dim('model', 3)
vocab = nc.Dim('vocab', 5)
enc = nc.Dim('enc')
rtime = nc.Dim('rtime')
rpred = nc.Dim('rpred')
ctime = nc.Dim('ctime')

@nc.network
def net(x: nc.Tensor[time, batch, feat], e: nc.Tensor[batch, enc, model], r: nc.Labels[batch, rtime, vocab], rp: nc.Labels[batch, rpred, vocab]):
    v5 = nc.Conv1d(model, filter_size=4, padding='valid', stride=2)(x, axis=time, out_axis=ctime)
    v6 = v5
    v7 = v6
    p8, q9 = nc.split(nc.Linear(2 * model)(v7), 2)
    v34 = nc.logsumexp(p8, axis=ctime)
    return {'o1': v34}

# diffgen seed 81, shrunk; fails with: traceback returnn: Exception: Tensor{_, [F|F_(N)], ctx=loop(_[B])}: cannot set batch_dim_axis
import netc as nc
from netc import batch
time = nc.Dim('time')
feat = nc.Dim('feat', 6)
hidden = nc.Dim('hidden', 6)
model = nc.Dim('model', 6)
vocab = nc.Dim('vocab', 5)
enc = nc.Dim('enc')
ltime = nc.Dim('ltime')

@nc.network
def net(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, enc, model], y: nc.Labels[batch, time, vocab], z: nc.Labels[batch, ltime, vocab]):
    h8 = nc.zeros(batch, hidden)
    c9 = nc.zeros(batch, hidden)
    h11 = nc.zeros(batch, hidden)
    for f6, f7 in zip(e, e):
        p13, q14 = nc.split(nc.Linear(2 * hidden)(h8), 2)
        v15 = q14
        h8, c9 = nc.LstmCell(hidden)(v15, (h8, c9))
        h11 = 0.5 * h11 + q14
    return {'o0': h11}

# diffgen seed 2032, shrunk; fails with: traceback eager: RuntimeError: no parameters known
import netc as nc
from netc import batch
time = nc.Dim('time')
feat = nc.Dim('feat', 4)
hidden = nc.Dim('hidden', 6)
model = nc.Dim('model', 3)
enc = nc.Dim('enc')
ptime = nc.Dim('ptime')

@nc.network
def net(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, enc, model]):
    v3 = nc.Lstm(hidden, direction=1)(x)
    v4 = nc.max_pool(v3, axis=time, size=3, out_axis=ptime)
    h20 = nc.zeros(batch, feat)
    return {'o2': h20}

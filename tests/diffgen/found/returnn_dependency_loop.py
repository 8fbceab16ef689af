# diffgen seed 2028, shrunk; fails with: traceback returnn: NetworkConstructionDependencyLoopException
import netc as nc
from netc import batch
time = nc.Dim('time')
feat = nc.Dim('feat', 6)
hidden = nc.Dim('hidden', 4)
model = nc.Dim('model', 6)
vocab = nc.Dim('vocab', 5)
enc = nc.Dim('enc')
dec = nc.Dim('dec')

@nc.network
def net(x: nc.Tensor[time, batch, feat], e: nc.Tensor[batch, enc, model], tgt: nc.Labels[batch, dec, vocab]):
    v1 = e
    v3 = v1
    v4 = v3
    h6 = nc.zeros(batch, hidden)
    out7 = []
    for f5 in v4:
        s11 = nc.zeros(batch, hidden)
        inner13 = []
        for g12 in x:
            s11 = nc.Linear(hidden)(g12) + s11 + h6
            inner13.append(s11)
        m14 = nc.reduce_mean(inner13, axis=time)
        h6 = m14
        v15 = h6
        out7.append(v15)
    v16 = nc.stack(out7) * 2.0
    return {'o2': v16}

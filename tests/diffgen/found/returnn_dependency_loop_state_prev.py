# diffgen seed 156 (all features), not shrunk: traceback returnn: NetworkConstructionDependencyLoopException (the state acc6 [batch, ptime] is read through the unit's acc6_prev layer, which reads prev:acc6 and prev:acc6_prev)
import netc as nc
from netc import batch
time = nc.Dim('time')
feat = nc.Dim('feat', 6)
hidden = nc.Dim('hidden', 6)
model = nc.Dim('model', 6)
vocab = nc.Dim('vocab', 5)
emb = nc.Dim('emb', 3)
enc = nc.Dim('enc')
ptime = nc.Dim('ptime')

def helper18(a, scale=0.5):
    z = nc.Linear(model)(a)
    return nc.tanh(z * scale + nc.Linear(model, with_bias=False)(nc.tanh(a)))

@nc.network
def net(x: nc.Tensor[time, batch, feat], e: nc.Tensor[batch, enc, model], y: nc.Labels[batch, time, vocab]):
    v3 = nc.Embedding(vocab)(y)
    v4 = nc.Lstm(hidden, direction=-1)(v3)
    v5 = nc.max_pool(v3, axis=time, size=3, out_axis=ptime)
    acc6 = nc.zeros(batch, ptime)
    n7 = nc.zeros(batch)
    out8 = []
    for _ in range(2):
        v9 = nc.minimum(v5, acc6)
        acc6 = 0.9 * acc6 + 0.1
        n7 = n7 + 1.0
        v12 = nc.reduce_mean(v9, axis=ptime)
        v13 = nc.gelu(v12)
        out8.append(n7)
        if nc.end(n7 > 4.5):
            break
    nc.mark_as_loss(nc.cross_entropy(nc.Linear(vocab)(v4), y, axis=vocab), 'ce')
    return {'o0': out8, 'o1': v13}


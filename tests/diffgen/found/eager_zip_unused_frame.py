# diffgen seed 10948 (green features at the time): eager: RuntimeError: no parameters known for the module constructed at line 13, col 22 (the Linear of q2, which is only zipped over: its frame f5 is never read, so the compiler drops it)
import netc as nc
from netc import batch
time = nc.Dim('time')
feat = nc.Dim('feat', 4)
hidden = nc.Dim('hidden', 4)
model = nc.Dim('model', 6)
vocab = nc.Dim('vocab', 5)
emb = nc.Dim('emb', 3)

@nc.network
def net(x: nc.Tensor[batch, time, feat]):
    p1, q2 = nc.split(nc.Linear(2 * model)(x), 2)
    v4 = nc.tanh(nc.Linear(hidden)(x))
    h7 = nc.zeros(batch, feat)
    out10 = []
    for f5, f6 in zip(q2, v4):
        h7 = nc.tanh(nc.Linear(feat)(f6) + nc.Linear(feat, with_bias=False)(h7))
        out10.append(h7)
    v15 = nc.stop_gradient(nc.stack(out10))
    v16 = nc.log_softmax(v15, axis=feat)
    h18 = nc.zeros(batch, model)
    out19 = []
    for f17 in reversed(v16):
        p21, q22 = nc.split(nc.Linear(2 * model)(h18), 2)
        h18 = nc.tanh(nc.Linear(model)(f17) + nc.Linear(model, with_bias=False)(h18))
        out19.append(q22)
    p24, q25 = nc.split(nc.Linear(2 * model)(nc.stack(out19)), 2)
    return {'o0': q25, 'o1': p24}

# diffgen seed 11193 (green features at the time), not shrunk: RETURNN ValueError: Tensor{'v8_output', [B,F|F'model'(6)]}.copy_compatible_to(Tensor{'v12_output', [T|'time'[B],B,F|F'model'(6)]}) not allowed (v12 = concat of the state h10 and v8, a value from before the loop)
import netc as nc
from netc import batch
time = nc.Dim('time')
feat = nc.Dim('feat', 4)
model = nc.Dim('model', 6)

@nc.network
def net(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, time, model]):
    v1 = nc.exp(nc.clip(e, -2.0, 2.0))
    h3 = nc.zeros(batch, model)
    out4 = []
    for f2 in reversed(v1):
        h3 = nc.tanh(nc.Linear(model)(f2) + nc.Linear(model, with_bias=False)(h3))
        v6 = nc.sigmoid(nc.Linear(feat)(h3))
        out4.append(v6)
    v8 = nc.LayerNorm()(h3)
    h10 = nc.zeros(batch, feat)
    out11 = []
    for f9 in nc.stack(out4):
        v12 = nc.concat(h10, v8)
        h10 = nc.tanh(nc.Linear(feat)(f9) + nc.Linear(feat, with_bias=False)(h10))
        out11.append(v12)
    return {'o0': out11}

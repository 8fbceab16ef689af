# diffgen seed 2022, shrunk; fails with: traceback returnn: Exception: Tensor{_, [T|_[B],B]}: get_axis_from_description
import netc as nc
from netc import batch
time = nc.Dim('time')
feat = nc.Dim('feat', 6)
hidden = nc.Dim('hidden', 6)
model = nc.Dim('model', 6)
enc = nc.Dim('enc')
pa = nc.Dim('pa', 2)
pb = nc.Dim('pb', 3)

@nc.network
def net(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, enc, model]):
    v4 = x
    h17 = nc.zeros(batch, hidden)
    out19 = []
    for f16 in v4:
        v20 = nc.reduce_sum(f16, axis=feat)
        h17 = 0.5 * h17 + v20
        out19.append(h17)
    v22 = nc.split_dims(out19, axis=hidden, dims=(pa, pb))
    return {'o1': v22}

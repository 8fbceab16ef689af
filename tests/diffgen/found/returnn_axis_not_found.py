# diffgen seed 36, shrunk; fails with: traceback returnn: Exception: Tensor{_, [B,F|F_(N)]}: get_axis_from_description(Dim{_[B]}) not found
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 6)
hidden = nc.Dim("hidden", 4)
vocab = nc.Dim("vocab", 5)
ltime = nc.Dim("ltime")


@nc.network
def net(x: nc.Tensor[batch, time, feat], z: nc.Labels[batch, ltime, vocab]):
    v1 = x
    h3 = nc.zeros(batch, hidden)
    h11 = nc.zeros(batch, feat)
    out12 = []
    for f10 in reversed(v1):
        v16 = h11
        h11 = v16 + h11
        out12.append(h3)
    return {"o1": h11, "o2": out12}

# diffgen seed 15, shrunk; fails with: traceback returnn: AssertionError: Tensor{_, [T|_[B],B,F|F_(N)]}: invalid perm [Dim{B}, Dim{_[B]}, Dim{_[B]}, Dim{F_(N)}] length
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
hidden = nc.Dim("hidden", 4)
model = nc.Dim("model", 6)
vocab = nc.Dim("vocab", 5)
enc = nc.Dim("enc")
ltime = nc.Dim("ltime")
ptime = nc.Dim("ptime")


@nc.network
def net(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, enc, model], z: nc.Labels[batch, ltime, vocab]):
    v1 = e
    v2 = nc.softmax(v1, axis=enc)
    v4 = nc.Lstm(hidden, direction=1)(v2)
    v5 = nc.max_pool(x, axis=time, size=3, out_axis=ptime)
    h8 = nc.zeros(batch, hidden)
    out9 = []
    for f7 in nc.unstack(v5, axis=ptime):
        v10 = -v4
        s11 = nc.zeros(batch, feat)
        inner13 = []
        for g12 in v2:
            s11 = nc.tanh(nc.Linear(feat)(g12) + nc.Linear(feat, with_bias=False)(s11) + f7)
            inner13.append(s11)
        m14 = nc.reduce_mean(inner13, axis=enc)
        h8 = nc.tanh(nc.Linear(hidden)(m14) + nc.Linear(hidden)(h8))
        out9.append(v10)
    v16 = nc.tanh(nc.Linear(hidden)(nc.stack(out9)))
    return {"o0": v16, "o1": h8}

# diffgen seed 4, shrunk; fails with: traceback returnn: AssertionError: (no message) in _tensor_extra.py:copy_as_time_major
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
hidden = nc.Dim("hidden", 6)
model = nc.Dim("model", 3)
vocab = nc.Dim("vocab", 5)
enc = nc.Dim("enc")
ltime = nc.Dim("ltime")


def helper8(a, scale=0.5):
    z = nc.Linear(hidden)(a)
    return nc.tanh(z * scale + nc.Linear(hidden, with_bias=False)(nc.tanh(a)))


@nc.network
def net(
    x: nc.Tensor[batch, time, feat],
    e: nc.Tensor[batch, enc, model],
    y: nc.Labels[batch, time, vocab],
    z: nc.Labels[batch, ltime, vocab],
):
    v1 = x
    v2 = v1
    h4 = nc.zeros(batch, feat)
    out7 = []
    for _ in range(5):
        v9 = helper8(h4)
        v10 = nc.concat(h4, v9)
        v11 = v10
        out7.append(v11)
        if nc.end(nc.reduce_mean(v11, axis=feat + hidden) > 0.2):
            break
    v12 = nc.reduce_mean(v2, axis=time)
    out18 = []
    for f15 in out7:
        out18.append(v12)
    out27 = []
    for f23, f24 in zip(out7, out18):
        out27.append(v12)
    return {"o1": out27}

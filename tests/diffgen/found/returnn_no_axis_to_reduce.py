# diffgen seed 51, shrunk; fails with: traceback returnn: AssertionError: no axis to reduce. input_data: Tensor{_, [], ctx=loop(_[?])}
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
hidden = nc.Dim("hidden", 4)
model = nc.Dim("model", 3)
enc = nc.Dim("enc")


def helper2(a, scale):
    z = nc.Linear(hidden)(a)
    return nc.tanh(z * scale + nc.Linear(hidden, with_bias=False)(nc.tanh(a)))


@nc.network
def net(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, enc, model]):
    v1 = e
    v3 = helper2(v1, 0.8)
    h13 = nc.zeros(batch, hidden)
    for _ in range(1 * x.max_seq_len + 1):
        w17 = nc.dot(v3, h13, reduce=hidden)
        ctx18 = nc.dot(w17, v3, reduce=enc)
        h13 = 0.5 * h13 + ctx18
        if nc.end(nc.reduce_mean(h13, axis=hidden) > 0.2):
            break
    return {"o2": h13}

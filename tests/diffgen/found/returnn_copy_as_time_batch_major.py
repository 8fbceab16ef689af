# diffgen seed 24, shrunk; fails with: traceback returnn: AssertionError: (no message) in _tensor_extra.py:copy_as_time_batch_major
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 6)
model = nc.Dim("model", 3)
vocab = nc.Dim("vocab", 5)
enc = nc.Dim("enc")
ltime = nc.Dim("ltime")
blank = nc.Dim("blank", 1)


@nc.network
def net(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, enc, model], z: nc.Labels[batch, ltime, vocab]):
    v5 = nc.log(nc.sigmoid(x) + 0.5)
    h7 = nc.zeros(batch, feat)
    h18 = h7
    for f17 in e:
        h18 = nc.GruCell(feat)(f17, h18)
    v25 = nc.expand(h18, time) * v5
    h27 = h7
    n28 = nc.zeros(batch)
    out29 = []
    while True:
        n28 = n28 + 1.0
        lab37 = nc.argmax(nc.Linear(vocab)(nc.tanh(h27)), axis=vocab)
        out29.append(lab37)
        if nc.end(n28 > 4.5):
            break
    ctc_in = nc.Linear(vocab + blank)(v25)
    nc.mark_as_loss(nc.ctc_loss(ctc_in, z, axis=vocab + blank), "ctc")
    return {"o0": out29}

# diffgen seed 100092, shrunk: RETURNN moved an `LstmCell` whose input is invariant (h11) out of its loop when only h was read after it ("expected to be used inside a RecLayer"); eager stacked `out31` (the last h appended per step of a later loop) over the first loop's dim for a sequence of one frame (tests/test_eager.py).
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 6)
model = nc.Dim("model", 3)
vocab = nc.Dim("vocab", 5)
enc = nc.Dim("enc")
frames4 = nc.Dim("frames4")


@nc.network
def net(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, enc, model], y: nc.Labels[batch, time, vocab]):
    v2 = x
    v5 = nc.slice_frames(v2, axis=time, stop=3, out_axis=frames4)
    v9 = v5
    h11 = nc.zeros(batch, feat)
    h13 = nc.zeros(batch, feat)
    c14 = nc.zeros(batch, feat)
    out15 = []
    for _f10 in v9:
        h13, c14 = nc.LstmCell(feat)(h11, (h13, c14))
        out15.append(h11)
    v25 = out15
    v26 = v2
    out31 = []
    for _f27 in v26:
        out31.append(h13)
    nc.mark_as_loss(nc.cross_entropy(nc.Linear(vocab)(out31), y, axis=vocab, label_smoothing=0.2), "ce")
    return {"o2": v25}

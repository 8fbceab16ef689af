"""rnnt_loss on logits that are a `Linear` of an input over the (time, labels+1) lattice, blank last
and blank first: tests/test_rnnt.py checks it against a numpy reference, and its gradient."""

from netc import Dim, Labels, Linear, Tensor, batch, mark_as_loss, network, rnnt_loss

time = Dim("time")
label_time = Dim("label_time")
pred_time = Dim("pred_time")  # label_time + 1
feat = Dim("feat", 3)
vocab = Dim("vocab", 4)
blank = Dim("blank", 1)


@network
def rnnt_linear(z: Tensor[batch, time, pred_time, feat], y: Labels[batch, label_time, vocab]):
    logits = Linear(vocab + blank)(z)
    last = rnnt_loss(logits, y, axis=vocab + blank, time_axis=time)
    mark_as_loss(last, "rnnt")
    first = rnnt_loss(logits, y, axis=vocab + blank, time_axis=time, blank_index=0)
    mark_as_loss(first, "rnnt_first")
    return {"seq": last, "first_seq": first}

"""CTC on input labels (declared before the frames), over pooled frames: verify draws label
lengths that fit each sequence's frames and labels whose repeats fit too, with two label classes
(repeats are frequent) and with one (every label repeats: at most half the frames)."""

from netc import Dim, Labels, Linear, Tensor, batch, ctc_loss, mark_as_loss, max_pool, network, tanh

time = Dim("time")
frames = Dim("frames")  # after pooling: ceil(time / 2)
label_time = Dim("label_time")
one_time = Dim("one_time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 2)
one = Dim("one", 1)
blank = Dim("blank", 1)


@network
def ctc_input_labels(
    y: Labels[batch, label_time, vocab], x: Tensor[batch, time, feat], z: Labels[batch, one_time, one]
):
    pooled = max_pool(tanh(x), axis=time, size=2, out_axis=frames)
    per_seq = ctc_loss(Linear(vocab + blank)(pooled), y, axis=vocab + blank)
    mark_as_loss(per_seq, "ctc")
    one_seq = ctc_loss(Linear(one + blank)(pooled), z, axis=one + blank)
    mark_as_loss(one_seq, "ctc_one")
    return {"ctc_seq": per_seq, "ctc_one_seq": one_seq}

"""Losses: cross_entropy with and without label smoothing, ctc_loss (blank last) on labels made
by argmax over pooled frames (so each sequence has enough frames for its labels)."""

from netc import (
    Dim,
    Labels,
    Linear,
    Tensor,
    argmax,
    batch,
    cross_entropy,
    ctc_loss,
    mark_as_loss,
    max_pool,
    network,
    tanh,
)

time = Dim("time")
label_time = Dim("label_time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)
blank = Dim("blank", 1)


@network
def losses(x: Tensor[batch, time, feat], y: Labels[batch, time, vocab]):
    logits = Linear(vocab)(tanh(x))
    mark_as_loss(cross_entropy(logits, y, axis=vocab, label_smoothing=0.1), "ce_smooth")
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    labels = argmax(Linear(vocab)(max_pool(x, axis=time, size=3, out_axis=label_time)), axis=vocab)
    per_seq = ctc_loss(Linear(vocab + blank)(x), labels, axis=vocab + blank)
    mark_as_loss(per_seq, "ctc")
    return {"output": cross_entropy(logits, y, axis=vocab, label_smoothing=0.2), "ctc_seq": per_seq}

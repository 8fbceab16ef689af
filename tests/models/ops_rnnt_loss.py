"""rnnt_loss over a joint network: the prediction network runs over the labels with a begin label
in front (here an input, `y_prev`, one frame longer than `y`: verify draws its lengths so), the
joint network adds it to every encoder frame. Blank last and blank first."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    concat,
    expand,
    mark_as_loss,
    network,
    rnnt_loss,
    tanh,
    zeros,
)

time = Dim("time")
label_time = Dim("label_time")
pred_time = Dim("pred_time")  # label_time + 1
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)
blank = Dim("blank", 1)
emb = Dim("emb", 3)
hidden = Dim("hidden", 6)


@network
def rnnt(x: Tensor[batch, time, feat], y: Labels[batch, label_time, vocab], y_prev: Labels[batch, pred_time, vocab]):
    enc = tanh(Linear(hidden)(x))
    h = zeros(batch, hidden)
    pred = []
    for e in Embedding(emb)(y_prev):
        h = tanh(Linear(hidden)(concat(e, h)))
        pred.append(h)
    joint = tanh(expand(enc, pred_time) + Linear(hidden)(pred))  # [batch, time, pred_time, hidden]
    logits = Linear(vocab + blank)(joint)
    loss = rnnt_loss(logits, y, axis=vocab + blank, time_axis=time)
    mark_as_loss(loss, "rnnt")
    first = rnnt_loss(logits, y, axis=vocab + blank, time_axis=time, blank_index=0)
    mark_as_loss(first, "rnnt_blank_first")
    return {"rnnt_seq": loss, "rnnt_first_seq": first}

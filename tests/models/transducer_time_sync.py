"""A transducer trained with `rnnt_loss` and decoded greedily, time-synchronously, from the same
modules: at every encoder frame up to 3 labels, each the best class of the joint network at the
current prediction state, until the blank (the symbols of a frame are steps written out, `symbol`
called three times: a loop with `end` nested in the frames' loop would stack them with lengths per
frame, which outputs cannot have). The prediction network starts from the blank as its begin
label, in training (`y_prev`, the labels with the blank in front, one frame longer than `y`) and in
decoding."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Module,
    Tensor,
    argmax,
    batch,
    concat,
    expand,
    full,
    mark_as_loss,
    network,
    rnnt_loss,
    tanh,
    where,
    zeros,
)

time = Dim("time")
label_time = Dim("label_time")
pred_time = Dim("pred_time")  # label_time + 1
feat = Dim("feat", 4)
vocab = Dim("vocab", 4)
blank = Dim("blank", 1)
classes = Dim("vocab+blank", 5)  # the dim `vocab + blank` makes; the blank is the last class
emb = Dim("emb", 3)
hidden = Dim("hidden", 6)
BLANK = 4


class Prediction(Module):
    def __init__(self):
        self.embed = Embedding(emb)
        self.step = Linear(hidden)

    def __call__(self, label, s):
        return tanh(self.step(concat(self.embed(label), s)))


class Joint(Module):
    def __init__(self):
        self.enc = Linear(hidden)
        self.pred = Linear(hidden, with_bias=False)
        self.out = Linear(vocab + blank)

    def __call__(self, enc, pred):
        return self.out(tanh(self.enc(enc) + self.pred(pred)))


def symbol(joint, prediction, enc_t, s, more):
    """One more symbol at this frame while `more` is 1.0 (no blank yet): the best class; a label advances
    the prediction state. The state, the symbol (the blank once the frame is done), `more`."""
    best = argmax(joint(enc_t, s), axis=vocab + blank)
    more = where(best != BLANK, more, 0.0)  # 1.0 while the frame emits labels
    emit = more > 0.5
    return where(emit, prediction(best, s), s), where(emit, best, BLANK), more


@network
def transducer(
    x: Tensor[batch, time, feat], y: Labels[batch, label_time, vocab], y_prev: Labels[batch, pred_time, classes]
):
    enc = tanh(Linear(hidden)(x))
    prediction = Prediction()
    joint = Joint()
    # training: the prediction network over the begin label and the labels, the joint over the lattice
    h = zeros(batch, hidden)
    preds = []
    for label in y_prev:
        h = prediction(label, h)
        preds.append(h)
    logits = joint(expand(enc, pred_time), preds)  # [batch, time, pred_time, vocab+blank]
    mark_as_loss(rnnt_loss(logits, y, axis=vocab + blank, time_axis=time), "rnnt")
    # greedy decoding, time-synchronous: at each frame up to MAX_SYMBOLS (3) labels, until the blank
    s = prediction(full(batch, value=BLANK, class_dim=classes), zeros(batch, hidden))
    sym0, sym1, sym2 = [], [], []  # each frame's first, second, third symbol (the blank after its last)
    for enc_t in enc:
        more = full(batch, value=1.0)  # no blank at this frame yet
        s, label, more = symbol(joint, prediction, enc_t, s, more)
        sym0.append(label)
        s, label, more = symbol(joint, prediction, enc_t, s, more)
        sym1.append(label)
        s, label, more = symbol(joint, prediction, enc_t, s, more)
        sym2.append(label)
    return {"sym0": sym0, "sym1": sym1, "sym2": sym2}

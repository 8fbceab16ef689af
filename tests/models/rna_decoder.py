"""A transducer with one label per frame (RNA-style, as RETURNN's transducer setups decode): a
`choice` over vocab + blank at every encoder frame; the prediction network's state advances only
on a label that is not the blank (`where`). The same source trains on a frame-level alignment
(`align`, one class per frame: teacher forcing, cross entropy) and is searched with a beam.

The step reads its encoder frame as a one-hot `dot` over `time` with frame positions made by a
counting loop (the language has no op for positions yet); the loop ends after the last frame."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    cast,
    choice,
    concat,
    cross_entropy,
    dot,
    end,
    mark_as_loss,
    network,
    reduce_max,
    stack,
    tanh,
    where,
    zeros,
)

time = Dim("time")
feat = Dim("feat", 4)
classes = Dim("classes", 5)  # vocab 4 + the blank, last
emb = Dim("emb", 3)
hidden = Dim("hidden", 6)
BLANK = 4
BEAM = 3


@network
def rna(x: Tensor[batch, time, feat], align: Labels[batch, time, classes]):
    enc = tanh(Linear(hidden)(x))
    k = zeros(batch)
    positions = []
    for _x_t in x:  # 0, 1, ..., T-1 per sequence
        positions.append(k)
        k = k + 1.0
    positions = stack(positions)  # [batch, time]
    frames = reduce_max(positions, axis=time) + 1.0
    s = zeros(batch, hidden)  # the prediction network's state: no label yet
    pos = zeros(batch)
    logits, labels = [], []
    for _ in range(x.max_seq_len):
        enc_t = dot(cast(positions == pos, "float32"), enc, reduce=time)  # this frame of enc
        scores = Linear(classes)(tanh(Linear(hidden)(enc_t) + Linear(hidden)(s)))
        logits.append(scores)
        label = choice(scores, target=align, beam=BEAM)
        labels.append(label)
        step = tanh(Linear(hidden)(concat(Embedding(emb)(label), s)))
        s = where(label != BLANK, step, s)  # only a label advances the prediction network
        pos = pos + 1.0
        if end(pos >= frames):
            break
    mark_as_loss(cross_entropy(logits, align, axis=classes), "ce")
    return {"output": labels, "logits": logits}

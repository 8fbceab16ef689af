"""A decoder whose scores come from its state before the step reads the last label (the state's
update after them reads it), and whose `end` tests the label before the step's choice: both are
of the hypotheses before the last choice. Eagerly they were taken as rows of the current ones
(a row per hypothesis, but another order: each must be the row the hypothesis continues)."""

from netc import (
    Dim,
    Embedding,
    GruCell,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    dot,
    end,
    full,
    network,
    softmax,
    stack,
    tanh,
    zeros,
)

dec = Dim("dec")
time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 5)
vocab = Dim("vocab", 5)


@network
def search_scores_before_label(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    h = zeros(batch, hidden)
    enc = []
    for x_t in x:
        h = tanh(Linear(hidden)(x_t) + Linear(hidden)(h))
        enc.append(h)
    s = zeros(batch, hidden)
    label = full(batch, value=1, class_dim=vocab)
    labels = []
    for _ in range(2 * x.max_seq_len + 2):
        att = softmax(dot(stack(enc), Linear(hidden)(s), reduce=hidden), axis=time)
        scores = Linear(vocab)(tanh(dot(att, stack(enc), reduce=time) + s))
        s = GruCell(hidden)(Embedding(feat)(label), s)
        last = label
        label = choice(scores, target=y, beam=3)
        labels.append(label)
        if end(last == 0):
            break
    return {"labels": labels}

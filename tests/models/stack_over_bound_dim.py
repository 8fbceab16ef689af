"""Loops with `end` bounded by `x.max_seq_len` stack values over x's own dim `time` (attention
weights): such a loop makes its own dim (the bound only limits it), in training (a `choice` loop
runs over its target's dim) and when searching, with and without `choice`."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    dot,
    end,
    full,
    network,
    reduce_mean,
    reduce_sum,
    softmax,
    tanh,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)


@network
def stack_over_bound_dim(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    h = reduce_mean(x, axis=time)
    weights, states = [], []
    for _ in range(x.max_seq_len + 1):
        w = softmax(dot(x, h, reduce=feat), axis=time)
        weights.append(w)
        h = tanh(Linear(feat)(dot(w, x, reduce=time)) + h)
        if end(reduce_sum(h, axis=feat) > 1.5):
            break
    g = h
    n = reduce_sum(h, axis=feat) * 0.0
    while True:
        g = tanh(Linear(feat)(g))
        n = n + 1.0
        if end(reduce_sum(g, axis=feat) + n > 3.0):  # within 7 steps
            break
        states.append(x * reduce_sum(g, axis=feat))  # [batch, time, feat] per step, after `end`
    label = full(batch, value=0, class_dim=vocab)
    labels, atts = [], []
    for _ in range(2 * x.max_seq_len):
        atts.append(softmax(dot(x, Embedding(feat)(label), reduce=feat), axis=time))  # before `choice`
        e = Embedding(feat)(label)
        att = softmax(dot(x, e, reduce=feat), axis=time)
        label = choice(Linear(vocab)(tanh(dot(att, x, reduce=time) + e + g)), target=y, beam=2)
        labels.append(label)
        if end(label == 0):
            break
    return {"weights": weights, "states": states, "labels": labels, "atts": atts}

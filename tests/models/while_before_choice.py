"""A `while True` loop before a `choice` decoder: eager mode finds the loop a list was stacked in
among all the model's loops, also those a search drops (this one: training and search agree on
its axis, not the decoder's)."""

from netc import Dim, Embedding, Labels, Linear, Tensor, argmax, batch, choice, end, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)
dec = Dim("dec")


@network
def while_before_choice(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    h = zeros(batch, feat)
    n = zeros(batch)
    counted = []
    while True:
        h = tanh(Linear(feat)(h) + 1.0)
        n = n + 1.0
        counted.append(argmax(Linear(vocab)(h), axis=vocab))  # [batch] per step, as `labels`
        if end(n > 2.5):
            break
    label = argmax(zeros(batch, vocab), axis=vocab)
    labels = []
    for _ in range(x.max_seq_len + 2):
        label = choice(Linear(vocab)(Embedding(feat)(label)), target=y, beam=3)
        labels.append(label)
        if end(label == 0):
            break
    return {"counted": counted, "labels": labels}

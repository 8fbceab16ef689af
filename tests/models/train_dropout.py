"""Dropout is active only in training: an output straight from `dropout`, one through a loop, and a loss."""

from netc import Dim, Labels, Linear, Tensor, batch, cross_entropy, dropout, mark_as_loss, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 6)
hidden = Dim("hidden", 5)
vocab = Dim("vocab", 4)


@network
def train_dropout(x: Tensor[batch, time, feat], y: Labels[batch, time, vocab]):
    h = zeros(batch, hidden)
    logits = []
    for x_t in x:
        h = tanh(Linear(hidden)(dropout(x_t, 0.5)) + Linear(hidden, with_bias=False)(h))
        logits.append(Linear(vocab)(h))
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"dropped": dropout(x, 0.5), "logits": logits}

"""cross_entropy per frame, on a whole sequence and per step inside a loop."""

from netc import Dim, Labels, Linear, Tensor, batch, cross_entropy, network

time = Dim("time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 6)


@network
def ce(x: Tensor[batch, time, feat], y: Labels[batch, time, vocab]):
    logits = Linear(vocab)(x)
    step_logits = Linear(vocab)
    losses = []
    for x_t, y_t in zip(x, y):
        losses.append(cross_entropy(step_logits(x_t), y_t, axis=vocab))
    return {"output": cross_entropy(logits, y, axis=vocab), "rnn": losses}

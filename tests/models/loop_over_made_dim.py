"""A loop over the dim an `end` loop made, whose body never reads its frame."""

from netc import Dim, Linear, Tensor, argmax, batch, end, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)
hidden = Dim("hidden", 6)


@network
def dec(x: Tensor[batch, time, feat]):
    h = tanh(Linear(hidden)(reduce_sum(x, axis=time)))
    labels = []
    for _ in range(2 * x.max_seq_len):
        h = tanh(Linear(hidden)(h))
        y = argmax(Linear(vocab)(h), axis=vocab)
        labels.append(y)
        if end(y == 0):
            break
    g = zeros(batch, hidden)
    out = []
    for _label in labels:  # one step per label, the label itself unused
        g = tanh(Linear(hidden)(g) + 1.0)
        out.append(g)
    return {"output": out}

"""A bidirectional encoder: a forward and a backward tanh RNN, concatenated per frame."""

from netc import Dim, Linear, Tensor, batch, concat, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 10)
hidden = Dim("hidden", 12)


def rnn_step(x, h):
    return tanh(Linear(hidden)(x) + Linear(hidden, with_bias=False)(h))


@network
def bidirectional(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    fw = []
    for x_t in x:
        h = rnn_step(x_t, h)
        fw.append(h)
    g = zeros(batch, hidden)
    bw = []
    for x_t in reversed(x):
        g = rnn_step(x_t, g)
        bw.append(g)
    return {"output": concat(fw, bw), "fw_last": h, "bw_last": g}

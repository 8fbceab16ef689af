"""Two stacked tanh RNN layers in one loop, with a projection before and a mean after."""

from netc import Dim, Linear, Tensor, batch, network, reduce_mean, relu, tanh, unstack, zeros

time = Dim("time")
feat = Dim("feat", 12)
hidden = Dim("hidden", 20)
out_dim = Dim("out", 8)


def rnn_layer(x, h):
    return tanh(Linear(hidden)(x) + Linear(hidden, with_bias=False)(h))


@network
def stacked_rnn(x: Tensor[batch, time, feat]):
    proj = relu(Linear(hidden)(x))
    h1 = zeros(batch, hidden)
    h2 = zeros(batch, hidden)
    ys = []
    for p_t in unstack(proj, axis=time):
        h1 = rnn_layer(p_t, h1)
        h2 = rnn_layer(h1, h2)
        ys.append(Linear(out_dim)(h2))
    return {"output": ys, "mean": reduce_mean(ys, axis=time), "h1": h1, "h2": h2}

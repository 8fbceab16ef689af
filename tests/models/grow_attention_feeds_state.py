"""A grown state whose attention feeds another state: RETURNN kept the attention in the loop but
moved the `cum_concat` (it reads frames only) out, where it gave every frame at every step; its
frame is now read through a layer kept in the loop."""

from netc import Dim, Linear, Tensor, batch, cum_concat, dot, empty, network, softmax, tanh, zeros

time = Dim("time")
hist_time = Dim("hist_time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def attention_feeds_state(x: Tensor[batch, time, feat]):
    keys = empty(batch, hist_time, hidden)
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        keys = cum_concat(keys, Linear(hidden)(x_t), axis=hist_time)
        w = softmax(dot(keys, Linear(hidden)(h), reduce=hidden), axis=hist_time)
        h = tanh(Linear(hidden)(dot(w, keys, reduce=hist_time)) + Linear(hidden)(x_t))
        out.append(h)
    return out

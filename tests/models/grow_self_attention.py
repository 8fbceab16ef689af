"""A state that gains one frame per step (`cum_concat`): causal self-attention over the frames
so far, step by step; keys and values grow along one dim."""

from netc import Dim, Linear, Tensor, batch, cum_concat, dot, empty, network, softmax, tanh

time = Dim("time")
hist_time = Dim("hist_time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def self_attention(x: Tensor[batch, time, feat]):
    keys = empty(batch, hist_time, hidden)
    values = empty(batch, hist_time, hidden)
    out = []
    for x_t in x:
        keys = cum_concat(keys, Linear(hidden)(x_t), axis=hist_time)
        values = cum_concat(values, tanh(Linear(hidden)(x_t)), axis=hist_time)
        w = softmax(dot(keys, Linear(hidden)(x_t), reduce=hidden), axis=hist_time)
        out.append(dot(w, values, reduce=hist_time))
    return out

"""Streamed per step (tests/test_streaming.py): per-frame work before and after the loop, an input
without the time dim read in every step, a state that starts from a constant other than zero, and
results after the last frame (the state, and a layer on it)."""

from netc import Dim, Linear, Tensor, batch, full, log_softmax, network, relu, tanh, zeros

time = Dim("time")
feat = Dim("feat", 6)
spk = Dim("spk", 3)
hidden = Dim("hidden", 8)
out_dim = Dim("out", 5)


@network
def stream_framewise(x: Tensor[batch, time, feat], speaker: Tensor[batch, spk]):
    proj = relu(Linear(hidden)(x)) + Linear(hidden)(speaker)  # per frame, and per sequence
    h = full(batch, hidden, value=0.5)
    s = zeros(batch, hidden)
    ys = []
    for p_t in proj:
        h = tanh(Linear(hidden)(p_t) + Linear(hidden, with_bias=False)(h))
        s = s + h
        ys.append(h)
    return {"output": log_softmax(Linear(out_dim)(ys), axis=out_dim), "last": Linear(out_dim)(h), "sum": s}

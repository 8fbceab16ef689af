"""Cannot stream (tests/test_streaming.py): the state starts from a value computed from an input,
which a cache's initial value (a constant in the sidecar) cannot be."""

from netc import Dim, Linear, Tensor, batch, network, tanh

time = Dim("time")
feat = Dim("feat", 4)
spk = Dim("spk", 2)
hidden = Dim("hidden", 5)


@network
def stream_computed_state(x: Tensor[batch, time, feat], speaker: Tensor[batch, spk]):
    h = Linear(hidden)(speaker)
    ys = []
    for x_t in x:
        h = tanh(Linear(hidden)(x_t) + Linear(hidden)(h))
        ys.append(h)
    return {"output": ys}

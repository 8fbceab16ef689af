"""Cannot stream (tests/test_streaming.py): each frame's output needs the state after the last
frame (the future)."""

from netc import Dim, Linear, Tensor, batch, network, stack, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 5)


@network
def stream_future(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    ys = []
    for x_t in x:
        h = tanh(Linear(hidden)(x_t) + Linear(hidden)(h))
        ys.append(h)
    # the outputs of every frame minus the last state: known only at the end
    centred = stack(ys) - h
    return {"centred": centred, "output": ys}

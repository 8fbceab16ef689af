"""Cannot stream (tests/test_streaming.py): each step attends over all frames of `enc`."""

from netc import Dim, Linear, Tensor, batch, dot, network, softmax, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 5)


@network
def stream_reads_whole(x: Tensor[batch, time, feat]):
    enc = Linear(hidden)(x)
    h = zeros(batch, hidden)
    ys = []
    # the attention's weights over time need every frame of enc at the first step
    for x_t in x:
        w = softmax(dot(enc, h, reduce=hidden), axis=time)
        h = tanh(Linear(hidden)(x_t) + dot(w, enc, reduce=time))
        ys.append(h)
    return {"output": ys}

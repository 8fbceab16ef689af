"""Lists appended in a backward loop, read by a later loop (`zip`, a plain `for`) and returned:
their values in frame order, as the stacked tensor is (eager mode once iterated them in the
order they were appended, last frame first)."""

from netc import Dim, Linear, Lstm, Tensor, batch, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat]):
    fw = Lstm(hidden)(x)
    g = zeros(batch, hidden)
    bw = []
    for x_t in reversed(x):
        g = tanh(Linear(hidden)(x_t) + g)
        bw.append(g)
    s = zeros(batch, hidden)
    out = []
    for a_t, b_t in zip(fw, bw):
        if reduce_sum(s, axis=hidden) > 0.1:
            s = tanh(a_t + s)
        elif reduce_sum(b_t, axis=hidden) > 0.0:
            s = b_t - s
        else:
            s = s * 0.5
        out.append(s)
    u = zeros(batch, hidden)
    for b_t in bw:
        u = tanh(Linear(hidden)(b_t) + u)
    return {"output": out, "s": s, "u": u, "bw": bw}

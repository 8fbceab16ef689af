"""An inner loop's stacked list appended to the outer loop's list: stacked over both loops (eager
mode once stacked only tensors)."""

from netc import Dim, Linear, Tensor, batch, network, tanh

time = Dim("time")
enc = Dim("enc")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat], e: Tensor[batch, enc, feat]):
    outer = []
    for x_t in x:
        query = Linear(hidden)(x_t)
        inner = []
        for e_t in e:
            inner.append(tanh(Linear(hidden)(e_t) + query))
        outer.append(inner)  # [batch, enc, hidden] per step
    return {"output": outer}  # [batch, time, enc, hidden]

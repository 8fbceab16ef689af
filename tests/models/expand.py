"""Explicit broadcasting with `expand`: outer sums over a static and a dynamic dim."""

from netc import Dim, Linear, Tensor, batch, expand, network, reduce_max, tanh, where, zeros

enc = Dim("enc")
time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def outer(x: Tensor[batch, time, feat], e: Tensor[batch, enc, feat]):
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        grid = expand(x_t, hidden) + expand(h, feat)  # [batch, feat, hidden]
        energy = expand(Linear(feat)(x_t), enc) + e  # [batch, enc, feat]: additive attention
        h = tanh(Linear(hidden)(reduce_max(energy, axis=enc)) + reduce_max(grid, axis=feat))
        out.append(h)
    big = where(x > 0.0, expand(reduce_max(e, axis=enc), time), 0.0)  # [batch, time, feat]
    return {"output": out, "big": big}

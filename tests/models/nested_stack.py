"""Nested loops where the inner loop's result is a stacked list (read inside the outer step)."""

from netc import Dim, Linear, Tensor, batch, network, reduce_max, tanh, zeros

time = Dim("time")
enc_time = Dim("enc_time")
feat = Dim("feat", 5)
hidden = Dim("hidden", 6)


@network
def nested_stack(x: Tensor[batch, time, feat], enc: Tensor[batch, enc_time, feat]):
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        q = Linear(hidden)(h)
        scores = []
        g = zeros(batch, hidden)
        for e_t in enc:
            g = tanh(Linear(hidden)(e_t) + q + g)
            scores.append(g)
        h = tanh(Linear(hidden)(x_t) + reduce_max(scores, axis=enc_time))
        out.append(h)
    return {"output": out, "last": h}

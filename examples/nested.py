"""Nested loops: for each output frame, an inner loop runs over the whole encoder sequence.

The inner loop accumulates a query-dependent summary of `enc` (its own state `s`), which
feeds the outer state `h`. Inner and outer sequences have their own, unequal lengths.
"""

from netc import Dim, Linear, Tensor, batch, network, sigmoid, tanh, zeros

time = Dim("time")
enc_time = Dim("enc_time")
feat = Dim("feat", 6)
enc_feat = Dim("enc_feat", 5)
hidden = Dim("hidden", 8)


@network
def nested(x: Tensor[batch, time, feat], enc: Tensor[batch, enc_time, enc_feat]):
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        query = Linear(hidden)(h)
        s = zeros(batch, hidden)
        for e_t in enc:
            gate = sigmoid(Linear(hidden)(e_t) + query)
            s = gate * s + (1.0 - gate) * tanh(Linear(hidden)(e_t))
        h = tanh(Linear(hidden)(x_t) + s)
        out.append(h)
    return {"output": out, "last": h}

"""A loop with `end` and a per-sequence bound `2 * x.max_seq_len`; the ending step is stacked."""

from netc import Dim, Linear, Tensor, batch, end, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    for x_t in x:
        h = tanh(Linear(hidden)(x_t) + h)
    s = h
    out = []
    for _step in range(2 * x.max_seq_len):
        s = tanh(Linear(hidden)(s))
        out.append(s)
        if end(reduce_sum(s, axis=hidden) > 0.5):
            break
    return {"output": out, "last": s}

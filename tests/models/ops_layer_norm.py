"""LayerNorm over the feature dim, on a whole sequence and inside a loop."""

from netc import Dim, LayerNorm, Linear, Tensor, batch, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 6)
hidden = Dim("hidden", 5)


@network
def norm(x: Tensor[batch, time, feat]):
    lin = Linear(hidden)(x)
    y = LayerNorm()(lin)
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        h = LayerNorm()(tanh(Linear(hidden)(x_t) + h))
        out.append(h)
    return {"output": y, "rnn": out}

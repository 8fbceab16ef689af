"""LayerNorm with another epsilon and without bias (RETURNN's `norm` layer), on a whole sequence
and inside a loop: the normalisations of RETURNN's LayerNormVariantsLSTM cell."""

from netc import Dim, LayerNorm, Linear, Tensor, batch, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 6)
hidden = Dim("hidden", 5)


@network
def norm_eps(x: Tensor[batch, time, feat]):
    lin = Linear(hidden)(x)
    y = LayerNorm(eps=0.5, with_bias=False)(lin)
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        h = LayerNorm(eps=1e-12)(tanh(Linear(hidden)(x_t) + h))
        out.append(h)
    return {"output": y, "rnn": out}

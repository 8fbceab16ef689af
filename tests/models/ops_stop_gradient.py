"""stop_gradient is the identity in the forward pass, also inside a loop."""

from netc import Dim, Linear, Tensor, batch, network, stop_gradient, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def frozen(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        h = tanh(Linear(hidden)(x_t) + stop_gradient(h))
        out.append(h)
    return {"output": stop_gradient(Linear(hidden)(x)), "rnn": out}

"""dropout: active only in training; identity in evaluation (which `netc verify` runs)."""

from netc import Dim, Linear, Tensor, batch, dropout, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def drop(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        h = tanh(Linear(hidden)(dropout(x_t, 0.5)) + h)
        out.append(h)
    return {"output": dropout(x, 0.3), "rnn": out, "none": dropout(x, 0.0)}

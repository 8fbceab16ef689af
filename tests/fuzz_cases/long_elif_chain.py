"""The seed's Elman loop: one step per frame, state `h`, stacked output and last frame."""

from netc import Dim, Linear, Tensor, batch, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 40)
hidden = Dim("hidden", 32)


@network
def elman(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    out = []
    for t in range(x.max_seq_len):
        x_lin = Linear(hidden)(x[t])
        h_prev = h
        h = tanh(Linear(hidden)(x_lin + h_prev))
        if False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        elif False:
            pass
        out.append(h)
    return {"output": out, "last": h}

"""`searching()` in a network without `choice`: always False (no search network), so `where` and
`if` on it take the other branch, and the branch never taken is not computed."""

from netc import Dim, Linear, Tensor, batch, network, searching, tanh, where, zeros

time = Dim("time")
feat = Dim("feat", 3)
hidden = Dim("hidden", 4)


@network
def searching_no_choice(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        if searching():
            h = tanh(Linear(hidden)(x_t))
        else:
            h = tanh(Linear(hidden)(x_t) + Linear(hidden, with_bias=False)(h))
        out.append(where(searching(), 2.0 * h, h))
    return {"output": out, "flag": where(searching(), zeros(batch), zeros(batch) + 1.0)}

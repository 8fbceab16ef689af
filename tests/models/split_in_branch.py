"""Parts of a `split` chosen by a tensor `if` on the state: RETURNN moves the split of the frame
out of the loop, while the `switch` reading its parts stays in it (run with `--no-hoist` too)."""

from netc import Dim, Linear, Tensor, batch, network, reduce_sum, split, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def branch(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        a, b, c = split(Linear(3 * hidden)(x_t), 3)
        if reduce_sum(h, axis=hidden) > 0.0:
            h = tanh(b + h)
        else:
            h = c
        out.append(h + a)
    return {"output": out, "last": h}

"""Inputs and variables named like RETURNN's own references (`data`, `prev`, `base`, `end`) and `output`."""

from netc import Dim, Linear, Tensor, batch, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 5)


@network
def dat(
    data: Tensor[batch, time, feat],
    prev: Tensor[batch, time, feat],
    base: Tensor[batch, feat],
    end: Tensor[batch, feat],
):
    output = tanh(Linear(hidden)(data + prev))
    h = zeros(batch, hidden)
    out = []
    for data_t in data:
        prev_ = Linear(hidden)(data_t + base + end)
        h = tanh(prev_ + h)
        return {"output": data}
        out.append(h)
    return {"output": output, "o2": out}

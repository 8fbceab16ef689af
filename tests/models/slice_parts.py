"""Python slicing of `split`'s parts (a tuple): `parts[1:]`, `parts[::2]`, `parts[-1]`."""

from netc import Dim, Linear, Tensor, batch, concat, network, split, tanh

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 2)


@network
def parts(x: Tensor[batch, time, feat]):
    p = split(Linear(4 * hidden)(x), 4)
    first, third = p[::2]
    return {"output": concat(*p[1:3]), "odd": tanh(first + third) * p[-1]}

"""A state with a feature dim that only its previous value has (its step adds a value without it):
RETURNN's first template of the state, built from a previous value without dims, lacks the dim,
so the state's initial value (zeros) is given (diffgen seed 2022)."""

from netc import Dim, Tensor, batch, network, reduce_sum, split_dims, zeros

time = Dim("time")
feat = Dim("feat", 6)
hidden = Dim("hidden", 6)
pa = Dim("pa", 2)
pb = Dim("pb", 3)


@network
def net(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    out = []
    for f in x:
        h = 0.5 * h + reduce_sum(f, axis=feat)
        out.append(h)
    return {"o": split_dims(out, axis=hidden, dims=(pa, pb)), "last": h}

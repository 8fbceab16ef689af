"""Arithmetic on bool and int tensors with Python numbers promotes as torch does: a float
number or `/` makes a float, an int number makes an int of a bool (`mask * 0.5` was typed bool
while eager mode computed a float)."""

from netc import Dim, Linear, Tensor, batch, cast, network, reduce_sum

time = Dim("time")
feat = Dim("feat", 4)


@network
def bool_int_promotion(x: Tensor[batch, time, feat]):
    y = Linear(feat)(x)
    mask = y > 0.0
    k = cast(y * 3.0, "int32")
    return {
        "output": y * (mask * 0.5) + 1.5 * mask,
        "counts": reduce_sum(2 * mask + 1, axis=feat),
        "halves": k / 2 + k * 0.5 + mask / 4,
        "ratio": k / (k * k + 1),
    }

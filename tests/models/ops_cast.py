"""cast between float32, int32 and bool, and labels to float."""

from netc import Dim, Labels, Tensor, batch, cast, network

time = Dim("time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)


@network
def casts(x: Tensor[batch, time, feat], y: Labels[batch, time, vocab]):
    i = cast(x * 3.0, "int32")  # truncates toward zero
    b = cast(i, "bool")
    return {
        "output": cast(i, "float32"),
        "int": i,
        "bool": b,
        "bool_float": cast(b, "float32"),
        "labels": cast(y, "float32"),
        "labels_int": cast(y, "int32"),
    }

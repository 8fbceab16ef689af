"""`//` and `%` of int32 tensors (floor semantics, as TF's floordiv/floormod): a label's parts
(a factored hybrid's phoneme and HMM state), negative numbers, tensor divisors."""

from netc import Dim, Labels, batch, cast, network

time = Dim("time")
states = Dim("states", 12)
phon = Dim("phon", 4)
state = Dim("state", 3)


@network
def parts(y: Labels[batch, time, states]):
    p = cast(y // 3, "int32", class_dim=phon)
    s = cast(y % 3, "int32", class_dim=state)
    return {
        "output": cast(p * 3 + s, "int32", class_dim=states),
        "phoneme": p,
        "state": s,
        "negative": (y - 7) // 4 + 10 * ((y - 7) % 4),
        "by_tensor": (y - 5) // (y % 4 + 1) + 10 * ((5 - y) % (y % 3 + 1)),
    }

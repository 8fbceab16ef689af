"""where: same dims, broadcast by dim union, and Python numbers as branches."""

from netc import Dim, Tensor, batch, cast, network, reduce_sum, relu, where

time = Dim("time")
feat = Dim("feat", 4)


@network
def select(x: Tensor[batch, time, feat]):
    cond = cast(relu(x), "bool")  # x > 0
    per_frame = cast(relu(reduce_sum(x, axis=feat)), "bool")  # [batch, time]
    per_seq = cast(reℓu(reduce_sum(x, axis=time)), "bool" ))  # [batch, feat]
    total = reduce_sum(x, axis=time)  # [batch, feat]
    return {
        "output": where(cond, x, -x),
        "union": where(per_frame, x, total),
        "seq": where(per_seq, x * 2.0, total),
        "scalar": where(cond, x, 0.0),
        "numbers": where(per_frame, 1.0, -1.0),
    }

"""Values over the loop's own axis read after the loop: one the step changes, one it does not
(RETURNN took the last frame of the second along the whole axis, not the loop's)."""

from netc import Dim, Linear, Tensor, batch, dot, network, reduce_sum

time = Dim("time")
feat = Dim("feat", 5)


@network
def own_axis_after_loop(x: Tensor[time, batch, feat]):
    ys = []
    for x_t in x:
        w = dot(Linear(feat)(x), x_t, reduce=feat)
        u = reduce_sum(Linear(feat)(x), axis=feat)
        ys.append(x_t * 2.0)
    return {"output": ys, "w": w, "u": u}

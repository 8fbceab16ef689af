# diffgen seed 300106, shrunk: the first result of a loop with `end` is a value assigned after
# the `break` (held: its layer is made for it), over another dynamic dim: the RETURNN emitter
# looked it up as a value of the step (KeyError) when choosing the rec layer's output.
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)


@nc.network
def net(x: nc.Tensor[time, batch, feat]):
    acc = nc.zeros(batch, time)
    held = nc.zeros(batch, feat)
    for _ in range(2):
        ctx = nc.dot(acc, x, reduce=time)
        if nc.end(nc.reduce_mean(ctx, axis=feat) > 0.2):
            break
        held = nc.Linear(feat)(ctx) / (1.5 + ctx)
    nc.mark_as_loss(held**2, "sq")
    return {"x": x}

"""`max_pool` with windows of 2 and 3 frames (padded frames never win), tensors created over the
dims it makes, and a loop over one of them."""

from netc import Dim, Linear, Tensor, batch, max_pool, network, reduce_sum, tanh, zeros

time = Dim("time")
half_time = Dim("half_time")
third_time = Dim("third_time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def pool(x: Tensor[batch, time, feat]):
    h = tanh(Linear(hidden)(x))
    halves = max_pool(h, axis=time, size=2, out_axis=half_time)
    thirds = max_pool(x, axis=time, size=3, out_axis=third_time)
    acc = zeros(batch, hidden)
    for t_t in thirds:
        acc = acc + reduce_sum(t_t, axis=feat) * Linear(hidden)(t_t)
    return {"output": zeros(batch, half_time, hidden) + halves, "thirds": thirds, "acc": acc}

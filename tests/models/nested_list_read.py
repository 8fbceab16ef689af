"""An inner loop's stacked list appended to the outer loop's list, read as a tensor after both
loops, the two loops as long as each other: eager mode stacked each inner list over the outer
loop (finished too, it was the outermost loop their items were made in and ran as many steps)
instead of the inner one (diffgen `list_of_lists`, seeds 15, 83)."""

from netc import Dim, Linear, Tensor, batch, network, reduce_mean, replace_dim, stack, tanh

time = Dim("time")
kv = Dim("kv")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat]):
    keys = replace_dim(x, axis=time, out_axis=kv)  # time's lengths
    outer = []
    for x_t in x:
        query = Linear(hidden)(x_t)
        inner = []
        for k_t in keys:
            inner.append(tanh(Linear(hidden)(k_t) + query))
        outer.append(inner)  # [batch, kv, hidden] per step
    both = stack(outer) * 2.0  # [batch, time, kv, hidden]
    return {"both": both, "mean": tanh(Linear(hidden)(reduce_mean(outer, axis=kv)))}

"""A state over a dynamic dim (from `max_pool`) whose previous value is read by work RETURNN
moves after the loop: read through a `_prev` layer kept in the loop, which starts from the
state's initial value like the state itself (else RETURNN's templates of the cycle
`acc_prev -> scaled -> acc` never settle: a dependency loop)."""

from netc import Dim, Tensor, batch, end, max_pool, minimum, network, reduce_mean, reduce_sum, zeros

time = Dim("time")
feat = Dim("feat", 4)
ptime = Dim("ptime")


@network
def state_prev_template_cycle(x: Tensor[batch, time, feat]):
    pooled = reduce_sum(max_pool(x, axis=time, size=3, out_axis=ptime), axis=feat)
    acc = zeros(batch, ptime)
    n = zeros(batch)
    counts = []
    for _ in range(3):
        low = minimum(pooled, acc)
        acc = 0.9 * acc + 0.1
        n = n + 1.0
        mean = reduce_mean(low, axis=ptime)
        counts.append(n)
        if end(n > 2.5):
            break
    return {"counts": counts, "mean": mean}

"""A `zip` over a dim `max_pool` made with a [batch, time] state updated from itself only: the
state is not the unit's `output` (RETURNN's template of it takes `time` from its initial value
for the time axis, not the loop's axis: the rec layer's template and output differed, an
assertion, with the body as written, `--no-hoist`)."""

from netc import Dim, Linear, Tensor, batch, max_pool, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
ptime = Dim("ptime")


@network
def output_state_other_dynamic_dim(x: Tensor[batch, time, feat]):
    pooled = max_pool(x, axis=time, size=2, out_axis=ptime)
    gate = tanh(Linear(feat)(pooled))
    acc = zeros(batch, time)
    out = []
    for p_t, g_t in zip(pooled, gate):
        acc = 0.9 * acc + 0.1
        out.append(p_t * g_t)
    return {"output": out, "acc": acc}

# diffgen seeds 19, 20, 21 (16 of 300 programs with every feature, generator of 3ed07cf; features end_stack_dyn,
# search_stack_dyn), reduced by hand:
#   netc verify compile_end_loop_stacks_bound_dim.py
#   error: cannot stack [batch, time] over `time`: it already has that dim (the whole sequence) ...
# A loop with `end` makes a dim of its own (`att_time`), also when its bound is `range(k * x.max_seq_len + b)`,
# but the parser takes the bound's dim (`time`) for the loop's axis when checking an append: a value
# over `time` (attention weights, `x` itself) cannot be stacked. With `range(6)` it verifies.
# Fixed (an append is checked against the dim the loop makes): tests/models/stack_over_bound_dim.py.
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)


@nc.network
def net(x: nc.Tensor[batch, time, feat]):
    s = nc.zeros(batch, feat)
    atts = []
    for _ in range(x.max_seq_len + 1):
        att = nc.softmax(nc.dot(x, s, reduce=feat), axis=time)
        s = nc.tanh(nc.dot(att, x, reduce=time) + nc.Linear(feat)(s))
        atts.append(att)
        if nc.end(nc.reduce_mean(s, axis=feat) > 0.23):
            break
    return {"atts": atts}

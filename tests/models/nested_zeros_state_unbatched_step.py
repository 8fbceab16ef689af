"""An `end` loop inside a loop whose state starts from `zeros(batch, ...)` and whose step reads
nothing with a batch dim (verified with `--no-hoist`, which keeps it in the outer loop): RETURNN's
"zeros" initial output would have no batch dim there, and the stack of its results lost batch
("copy_compatible_to ... not allowed, axis 0 (Dim{B}) not in source"); the same constant is made
at the network's top instead. Random program seed 900039, reduced."""

from netc import Dim, Linear, Tensor, batch, concat, end, network, reduce_sum, stack, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 4)


@network
def nested_zeros_state_unbatched_step(x: Tensor[feat, time, batch]):
    outs = []
    for _f in reversed(x):
        s = zeros(batch, hidden)
        for _k in range(4):
            s = tanh(Linear(hidden, with_bias=False)(s) + 0.5)
            if end(reduce_sum(s, axis=hidden) > 0.5):
                break
        outs.append(s)
    return {"outs": outs, "both": concat(x, stack(outs) * 2.0)}

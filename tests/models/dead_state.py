"""A loop state nothing reads but its own update (`h`): no result, no stack, no other state uses
it. RETURNN builds no layer or parameter for it, so the compiler removes it (diffgen seed 20418:
"RETURNN has no variable 'out/rec/h/W'")."""

from netc import Dim, Linear, Tensor, batch, network, reduce_sum, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def dead_state(x: Tensor[batch, time, feat]):
    total = reduce_sum(x, axis=time)
    acc = zeros(batch, feat)
    h = zeros(batch, hidden)
    out = []
    for x_t in x:
        acc = 0.5 * acc + x_t
        h = tanh(Linear(hidden)(x_t) + Linear(hidden, with_bias=False)(h))
        out.append(total)
    return {"output": out, "acc": acc}

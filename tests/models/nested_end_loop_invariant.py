"""A loop with `end` in another loop's step that reads nothing of it (its state starts at zeros
and reads only itself), stacked by the outer loop, also a backward one, diffgen seed 900039.
Without hoisting the inner loop stays in the outer one, and its state's initial value was
RETURNN's "zeros", whose template has no batch dim when no layer of the inner loop has one
("invalid perm", "copy_compatible_to ... not allowed, axis 0 (Dim{B}) not in source")."""

from netc import Dim, Linear, Tensor, batch, concat, end, network, reduce_sum, stack, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 5)


@network
def nested_end_loop_invariant(x: Tensor[feat, time, batch]):
    out = []
    for _x_t in x:
        s = zeros(batch, hidden)
        for _k in range(4):
            s = tanh(Linear(hidden, with_bias=False)(s) + 0.5)
            if end(reduce_sum(s, axis=hidden) > 0.5):
                break
        out.append(s)
    back = []
    for _x_t in reversed(x):
        r = zeros(batch, feat)
        for _j in range(3):
            r = tanh(Linear(feat)(r))
            if end(reduce_sum(r, axis=feat) > 0.0):
                break
        back.append(r)
    return {"out": out, "both": concat(x, stack(back))}

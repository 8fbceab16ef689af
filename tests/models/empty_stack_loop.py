"""Loops that stack nothing for a sequence, read as tensors: a loop over the dim a valid `Conv1d`
made (the sequence of length 2 is shorter than the filter: no frame, diffgen `conv_loop`, seed
15239 of the green set) and a loop with `end` whose appends stand after the `break` (a sequence of
length 2 ends at its first step). Each such stack has length 0 for that sequence; eager mode takes
its dims from the compiled graph's stack of that name, as the targets have them. A returned list of
an inner loop's stacks, empty for that sequence, keeps the inner loop's dim's length (diffgen seed
340)."""

from netc import Conv1d, Dim, Linear, Tensor, batch, end, network, reduce_sum, stack, tanh, zeros

time = Dim("time")
ctime = Dim("ctime")
feat = Dim("feat", 4)
hidden = Dim("hidden", 3)


@network
def f(x: Tensor[batch, time, feat]):
    c = Conv1d(hidden, filter_size=4, padding="valid")(x, axis=time, out_axis=ctime)
    h = zeros(batch, hidden)
    out = []
    for c_t in c:
        h = tanh(Linear(hidden)(c_t) + h)
        out.append(h)
    y = tanh(Linear(hidden)(stack(out) * 2.0))
    g = zeros(batch, hidden)
    for y_t in y:
        g = tanh(Linear(hidden)(y_t) + g)
    n = reduce_sum(reduce_sum(x * 0.0 + 1.0, axis=feat), axis=time)  # 4 per frame
    k = zeros(batch)
    labs = []
    for _step in range(4):
        k = k + 4.0
        if end(k > n - 6.0):  # at the first step for length 2
            break
        labs.append(tanh(Linear(hidden)(g) + k))
    s = zeros(batch, hidden)
    for l_t in Linear(hidden)(labs):
        s = tanh(l_t + s)
    nested = []  # per `ctime` step, a stack over `time`: none for the short sequence
    for c_t in c:
        inner = []
        for x_t in x:
            inner.append(tanh(Linear(hidden)(x_t) + c_t))
        nested.append(inner)
    return {"h": h, "y": y, "g": g, "s": s, "nested": nested}

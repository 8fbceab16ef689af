"""Loops with `end` appending each step the list an inner loop stacked (`while True` and a bound),
diffgen seed 600065. Eagerly, the loop such a list of lists was appended in was taken from its
first list alone, whose values a `while True` run (known from its first `end`) has not tagged
yet: the inner loop's run was taken for it, and the later lists were stacked over the outer
loop's dim ("list items have different dims")."""

from netc import Dim, Linear, Tensor, batch, end, network, reduce_sum, stack, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
hidden = Dim("hidden", 5)


@network
def end_loop_list_of_lists(x: Tensor[time, batch, feat]):
    h = zeros(batch, hidden)
    n = zeros(batch)
    outer = []
    while True:
        h = tanh(Linear(hidden)(h) + 0.3)
        s = h
        inner = []
        for x_t in x:
            s = tanh(Linear(hidden)(x_t) + Linear(hidden, with_bias=False)(s) + h)
            inner.append(s)
        n = n + 1.0
        outer.append(inner)
        if end(n > 4.5):
            break
    g = zeros(batch, hidden)
    bounded = []
    for _ in range(x.max_seq_len + 1):
        g = tanh(Linear(hidden)(g) - 0.2)
        inner2 = []
        for x_t in reversed(x):
            inner2.append(tanh(Linear(hidden)(x_t) + g))
        bounded.append(inner2)
        if end(reduce_sum(g, axis=hidden) > 0.5):
            break
    return {"outer": stack(outer) * 2.0, "bounded": bounded}

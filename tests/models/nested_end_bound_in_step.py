"""A loop with `end` in the step of another, bounded by an input's length (`range(x.max_seq_len)`,
`range(2 * e.max_seq_len + 1)`), diffgen seed 600043. Without hoisting the bound's layer is the
outer step's, which RETURNN moved out of the outer loop (it is loop-invariant there): the inner
loop's `base:` reference no longer found it ("LayerNotFound: layer 'seq_lens' not found")."""

from netc import Dim, Linear, Tensor, batch, end, network, reduce_sum, tanh, zeros

time = Dim("time")
enc = Dim("enc")
feat = Dim("feat", 4)
model = Dim("model", 5)


@network
def nested_end_bound_in_step(x: Tensor[batch, time, feat], e: Tensor[enc, batch, feat]):
    h = zeros(batch, model)
    out = []
    for x_t in x:
        v = tanh(Linear(model)(x_t) + h)
        s = zeros(batch, model)
        for _ in range(x.max_seq_len):
            s = tanh(Linear(model, with_bias=False)(s) + v + 0.5)
            if end(reduce_sum(s, axis=model) > 0.5):
                break
        r = zeros(batch, model)
        for _ in range(2 * e.max_seq_len + 1):
            r = tanh(Linear(model)(r) - v)
            if end(reduce_sum(r, axis=model) > 0.0):
                break
        h = tanh(Linear(model)(s) + Linear(model)(h))
        out.append(r)
    return {"h": h, "out": out}

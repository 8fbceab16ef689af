# diffgen seed 25408, shrunk by hand: as backward_outer_inner_lists.py, with the inner loop over a
# list an earlier loop stacked (a plain Python list eagerly, whose frames eager mode cannot tag):
# the end of the backward loop reversed the last inner list when it had as many items as the
# outer loop had steps (tests/test_eager.py).
from netc import Dim, Linear, Tensor, batch, network, reduce_sum, zeros

time = Dim("time")
enc = Dim("enc")
feat = Dim("feat", 4)
model = Dim("model", 6)
hidden = Dim("hidden", 4)


@network
def net(x: Tensor[batch, time, feat], e: Tensor[batch, enc, model]):
    per_enc = []
    for e_t in e:
        per_enc.append(Linear(feat)(e_t) * reduce_sum(x, axis=time))
    out = []
    for _x_t in reversed(x):
        s = zeros(batch, hidden)
        inner = []
        for p_t in per_enc:
            s = Linear(hidden)(p_t) + s
            inner.append(s)
        out.append(inner)
    return {"output": out}

# diffgen seed 100099, shrunk by hand: eager gave `zip(a, b)` a loop run per iterable; zip stops at
# the first one's end, so the other's run ended later, when it was collected, and the outer loop's
# values seemed made in a finished loop of their own: the inner lists, appended per outer step, were
# stacked over the outer dim for a sequence whose two dims have one length (tests/test_eager.py).
from netc import Dim, Linear, Tensor, batch, network, stack, zeros

time = Dim("time")
enc = Dim("enc")
feat = Dim("feat", 4)
model = Dim("model", 3)
hidden = Dim("hidden", 5)


@network
def net(x: Tensor[batch, time, feat], e: Tensor[batch, enc, model]):
    outer = []
    for _e_t, f_t in zip(e, Linear(feat)(e)):
        s = zeros(batch, hidden)
        inner = []
        for x_t in x:
            s = Linear(hidden)(x_t * f_t) + s
            inner.append(s)
        outer.append(inner)
    return {"output": stack(outer) * 2.0}

# diffgen seed 100630, shrunk by hand: when a backward loop ends, eager mode reverses the lists
# it appended to (into frame order); the last inner list (`inner`, a local of the same function)
# was reversed too when it had as many items as the outer loop had steps (tests/test_eager.py).
from netc import Dim, Linear, Tensor, batch, network, zeros

time = Dim("time")
enc = Dim("enc")
feat = Dim("feat", 4)
model = Dim("model", 3)
hidden = Dim("hidden", 6)


@network
def net(x: Tensor[time, batch, feat], e: Tensor[batch, enc, model]):
    h = Linear(hidden)(e)
    out = []
    for h_t in reversed(h):
        s = zeros(batch, hidden)
        inner = []
        for x_t in x:
            s = Linear(hidden)(x_t) + s + h_t
            inner.append(s)
        out.append(inner)
    return {"output": out}

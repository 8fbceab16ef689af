# diffgen seed 100160, shrunk by hand: without hoisting, RETURNN moved the inner loop (which no state needs) to after the outer one, where the outer step's frame it reads (base:f30, a rec_unstack RETURNN runs before the loop) is not found: LayerNotFound. The inner loop is collocated with what it reads of the outer unit (a rec_unstack through a copy).
import netc as nc
from netc import batch

time = nc.Dim("time")
hidden = nc.Dim("hidden", 6)
model = nc.Dim("model", 3)
enc = nc.Dim("enc")
grow = nc.Dim("grow")


@nc.network
def net(x: nc.Tensor[batch, time, model], e: nc.Tensor[batch, enc, model]):
    hist = nc.empty(batch, grow, hidden)
    out28 = []
    out29 = []
    for ti in range(e.max_seq_len):
        f30 = e[ti]
        s36 = nc.zeros(batch, model)
        inner38 = []
        for g37 in x:
            s36 = g37 + s36 + f30
            inner38.append(s36)
        hist = nc.cum_concat(hist, nc.Linear(hidden)(f30), axis=grow)
        out28.append(inner38)
        w = nc.dot(hist, nc.Linear(hidden)(f30), reduce=hidden)
        out29.append(nc.dot(w, hist, reduce=grow))
    return {"o0": nc.stack(out28), "o1": out29}

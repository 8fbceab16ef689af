# diffgen seed 100014, shrunk: `expand(v, time)` inserted time last with an int axis; RETURNN then took it for the feature axis of the loss [batch, time] ("Loss flattening not implemented"). A dynamic dim is now expanded as RETURNN's time axis ("T").
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
model = nc.Dim("model", 5)
vocab = nc.Dim("vocab", 5)
emb = nc.Dim("emb", 3)


@nc.network
def net(x: nc.Tensor[time, batch, feat], e: nc.Tensor[batch, time, model], y: nc.Labels[batch, time, vocab]):
    lab4 = nc.argmax(nc.Linear(vocab)(x), axis=vocab)
    v5 = nc.Embedding(emb)(lab4)
    out8 = []
    for f6 in v5:
        v12 = nc.Linear(feat)(f6)
        out8.append(v12)
    v13 = nc.expand(v12, time) * nc.stack(out8)
    nc.mark_as_loss(nc.reduce_sum(v13, axis=feat) ** 2, "sq")
    return {"o0": v5}

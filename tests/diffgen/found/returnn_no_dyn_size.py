# diffgen seed 40, shrunk; fails with: traceback returnn: AssertionError: Tensor{_, [T|_[B],B,F|_[B]]}: axis N has no dyn size
import netc as nc
from netc import batch
time = nc.Dim('time')
feat = nc.Dim('feat', 6)
model = nc.Dim('model', 3)
vocab = nc.Dim('vocab', 5)
emb = nc.Dim('emb', 3)

@nc.network
def net(x: nc.Tensor[time, batch, feat], y: nc.Labels[batch, time, vocab]):
    v4 = nc.Embedding(emb)(y)
    h7 = nc.zeros(batch, model)
    acc17 = nc.zeros(batch, time)
    n20 = nc.zeros(batch)
    out21 = []
    while True:
        acc17 = 0.9 * acc17 + 0.1
        ctx24 = nc.dot(acc17, v4, reduce=time)
        n20 = n20 + 1.0
        out21.append(h7)
        if nc.end(n20 > 4.5):
            break
    nc.mark_as_loss(ctx24 ** 2, 'sq')
    return {'o1': out21}

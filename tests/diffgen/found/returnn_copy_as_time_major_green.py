# diffgen seed 1004, shrunk; fails with: traceback returnn: AssertionError: (no message) in _tensor_extra.py:copy_as_time_major
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 6)
hidden = nc.Dim("hidden", 4)
model = nc.Dim("model", 6)
vocab = nc.Dim("vocab", 5)
emb = nc.Dim("emb", 3)


@nc.network
def net(x: nc.Tensor[batch, time, feat], y: nc.Labels[batch, time, vocab]):
    h3 = nc.zeros(batch, hidden)
    h5 = nc.zeros(batch, hidden)
    h7 = h3
    n8 = nc.zeros(batch)
    while True:
        p13, q14 = nc.split(nc.Linear(2 * model)(h7), 2)
        h7 = nc.tanh(nc.Linear(hidden)(h5) + nc.Linear(hidden)(h7))
        n8 = n8 + 1.0
        lab16 = nc.argmax(nc.Linear(vocab)(nc.tanh(p13)), axis=vocab)
        v17 = nc.Embedding(emb)(lab16)
        if nc.end(n8 > 2.5):
            break
    v18 = nc.tanh(nc.Linear(hidden)(h3))
    nc.mark_as_loss(nc.reduce_sum(v17, axis=emb) ** 2, "sq")
    return {"o0": v18}

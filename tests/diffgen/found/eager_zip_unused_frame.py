# diffgen seed 10948 (green features at the time): eager: no parameters known for the module constructed at ((12, 22),): q2 is only zipped over, its frame is never read
import netc as nc
from netc import batch
time = nc.Dim('time')
feat = nc.Dim('feat', 4)
hidden = nc.Dim('hidden', 4)
model = nc.Dim('model', 6)
vocab = nc.Dim('vocab', 5)
emb = nc.Dim('emb', 3)

class Inner25(nc.Module):

    def __init__(self, d):
        self.lin = nc.Linear(d)
        self.norm = nc.LayerNorm()

    def __call__(self, x):
        return self.norm(nc.tanh(self.lin(x)))

class Block24(nc.Module):

    def __init__(self, d):
        super().__init__()
        self.gate_lin = nc.Linear(d)
        self.inner = Inner25(d)

    def __call__(self, x):
        return self.gate(x, self.inner(x))

    def gate(self, x, y):
        return y * nc.sigmoid(self.gate_lin(x))

@nc.network
def net(x: nc.Tensor[batch, time, feat]):
    p1, q2 = nc.split(nc.Linear(2 * model)(x), 2)
    v4 = nc.Lstm(hidden, direction=1)(p1)
    h8 = nc.zeros(batch, hidden)
    n9 = nc.zeros(batch)
    out10 = []
    for _ in range(1 * x.max_seq_len + 2):
        v12 = nc.where(h8 > n9, h8, n9)
        lab13 = nc.argmax(nc.Linear(vocab)(nc.tanh(h8)), axis=vocab)
        v14 = nc.Embedding(emb)(lab13)
        h8 = nc.tanh(nc.Linear(hidden)(v14) + nc.Linear(hidden, with_bias=False)(h8))
        n9 = n9 + 1.0
        out10.append(v12)
        if nc.end(n9 > 4.5):
            break
    v16 = nc.stop_gradient(nc.stack(out10))
    v17 = nc.log_softmax(v16, axis=hidden)
    h19 = nc.zeros(batch, model)
    out21 = []
    for f18 in v17:
        v23 = nc.expand(f18, time) * v4
        block26 = Block24(model)
        v27 = block26(v23)
        h19 = nc.tanh(nc.Linear(model)(f18) + nc.Linear(model, with_bias=False)(h19))
        v28 = nc.expand(h19, time) * v27
        out21.append(v28)
    h30 = h8
    for f29 in v16:
        h30 = nc.tanh(nc.Linear(hidden)(f29) + nc.Linear(hidden, with_bias=False)(h30))
    v35 = nc.reduce_sum(h30, axis=hidden)
    return {'o0': v35, 'o1': out21, 'o2': h30}

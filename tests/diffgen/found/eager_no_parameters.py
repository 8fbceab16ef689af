# diffgen seed 14, shrunk: traceback eager: RuntimeError: no parameters known for the module constructed at ((N, N), (N, N))
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 4)
model = nc.Dim("model", 5)
vocab = nc.Dim("vocab", 5)
enc = nc.Dim("enc")


class Inner3(nc.Module):
    def __init__(self, d):
        self.lin = nc.Linear(d)
        self.norm = nc.LayerNorm()

    def __call__(self, x):
        return self.norm(nc.tanh(self.lin(x)))


class Block2(nc.Module):
    def __init__(self, d):
        super().__init__()
        self.gate_lin = nc.Linear(d)
        self.inner = Inner3(d)
        self.proj = nc.Linear(d)

    def __call__(self, x):
        return self.gate(x, self.inner(x))

    def gate(self, x, y):
        return y * nc.sigmoid(self.gate_lin(x))


@nc.network
def net(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, enc, model], y: nc.Labels[batch, time, vocab]):
    v1 = nc.reduce_mean(x, axis=time)
    block4 = Block2(model)
    v5 = block4(v1)
    if nc.reduce_sum(v5, axis=model) > 0.0:
        r6 = 0.9 * v5
    else:
        r6 = 0.9 * v5
    h8 = r6
    return {"o2": h8}

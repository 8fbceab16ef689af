# diffgen seed 50, shrunk; fails with: traceback returnn: AssertionError: RecLayer _: not equal
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 6)
hidden = nc.Dim("hidden", 6)
model = nc.Dim("model", 5)
vocab = nc.Dim("vocab", 5)
enc = nc.Dim("enc")
dec = nc.Dim("dec")


@nc.network
def net(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, enc, model], tgt: nc.Labels[batch, dec, vocab]):
    out6 = []
    for f3 in reversed(e):
        out6.append(x)
    v11 = nc.tanh(nc.Linear(feat, with_bias=False)(nc.stack(out6)))
    s = nc.zeros(batch, hidden)
    label = nc.argmax(nc.zeros(batch, vocab), axis=vocab)
    logits, labels = ([], [])
    for _ in range(2 * x.max_seq_len + 2):
        scores = nc.Linear(vocab)(s)
        logits.append(scores)
        label = nc.choice(scores, target=tgt, beam=2)
        labels.append(label)
        if nc.end(label == 0):
            break
    return {"o0": v11, "o1": out6, "labels": labels, "logits": logits}

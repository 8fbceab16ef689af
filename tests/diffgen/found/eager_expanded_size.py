# diffgen seed 106, shrunk; fails with: traceback eager: RuntimeError: The expanded size
import netc as nc
from netc import batch

time = nc.Dim("time")
feat = nc.Dim("feat", 6)
hidden = nc.Dim("hidden", 4)
model = nc.Dim("model", 6)
vocab = nc.Dim("vocab", 5)
emb = nc.Dim("emb", 3)
dec = nc.Dim("dec")


@nc.network
def net(x: nc.Tensor[batch, time, feat], e: nc.Tensor[batch, time, model], tgt: nc.Labels[batch, dec, vocab]):
    s = nc.zeros(batch, hidden)
    label = nc.argmax(nc.zeros(batch, vocab), axis=vocab)
    logits, labels = ([], [])
    for _ in range(1 * x.max_seq_len + 1):
        grid = nc.reduce_max(s + nc.expand(nc.Embedding(emb)(label), hidden), axis=hidden)
        s = nc.Linear(hidden)(grid) + s
        scores = nc.Linear(vocab)(s)
        logits.append(scores)
        label = nc.choice(scores, target=tgt, beam=4)
        if nc.end(label == 0):
            break
    return {"logits": logits}

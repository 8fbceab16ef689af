"""Two choices in one step and a state carried with the label's hypotheses (computed from the
position, not the label) that starts from zeros with a dim its update does not have: the
accumulated attention weights `[batch, time, one]` plus weights `[batch, time]` (broadcast).
RETURNN's first template of the state comes from its layer's sources, and the zeros of the
label's choice it adds (`_rebeamed`) looked like a source giving all its dims (a choice's
output): the state got no initial value, its template lost `one` and the linear reading its
previous value failed. Such a state always has its initial value given."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Lstm,
    Tensor,
    batch,
    choice,
    dot,
    end,
    network,
    one_hot,
    reduce_sum,
    softmax,
    tanh,
    zeros,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 6)
model = Dim("model", 5)
vocab = Dim("vocab", 7)
one = Dim("one", 1)


@network
def state_broadcast(x: Tensor[batch, time, feat], align: Labels[batch, dec, time], y: Labels[batch, dec, vocab]):
    enc = Lstm(model)(x)
    s = zeros(batch, model)
    acc = zeros(batch, time, one)
    emb = zeros(batch, model)
    labels = []
    for _ in range(x.max_seq_len + 2):
        s = tanh(Linear(model)(s) + Linear(model)(emb))
        energy = reduce_sum(tanh(enc + Linear(model)(s) + Linear(model)(acc)), axis=model)
        where = choice(energy, target=align, beam=3, input_type="log_prob", length_normalization=False)
        att = softmax(energy + one_hot(where), axis=time)
        acc = acc + att * 0.5  # [batch, time, one] + [batch, time]
        label = choice(Linear(vocab)(s + dot(att, enc, reduce=time)), target=y, beam=3)
        emb = Embedding(model)(label)
        labels.append(label)
        if end(label == 0):
            break
    return {"output": labels}

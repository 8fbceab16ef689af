"""Two choices in one step where nothing reads the label: the next step's position is scored from
the decoder state (which ignores the labels) and the accumulated attention weights (a state
carried with the label's hypotheses, not computed from the label). Searching, the position's
choice extends the hypotheses the previous step's label choice made. RETURNN gives a `choice`
whose scores come from no choice the hypotheses of its own previous step (the previous
position's): the position's scores read the previous label's choice through zeros computed from
its `prev:` layer (`RecLowering._chain_choices`), else the state computed from both cannot
compare them."""

from netc import (
    Dim,
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
    sigmoid,
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
def label_unread(x: Tensor[batch, time, feat], align: Labels[batch, dec, time], y: Labels[batch, dec, vocab]):
    enc = Lstm(model)(x)
    fertility = sigmoid(Linear(one)(enc))
    s = zeros(batch, model)
    acc = zeros(batch, time, one)
    labels = []
    for _ in range(x.max_seq_len + 2):
        s = tanh(Linear(model)(s))
        energy = reduce_sum(tanh(enc + Linear(model)(s) + Linear(model)(acc)), axis=model)
        where = choice(energy, target=align, beam=3, input_type="log_prob", length_normalization=False)
        att = softmax(energy + one_hot(where), axis=time)
        acc = acc + att * fertility * 0.5
        label = choice(Linear(vocab)(s + dot(att, enc, reduce=time)), target=y, beam=3)
        labels.append(label)
        if end(label == 0):
            break
    return {"output": labels}

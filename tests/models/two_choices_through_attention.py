"""Two choices in one step, the label scored from attention on the position chosen (as RETURNN's
latent attention configs), with the attention's context and accumulated weights as states
carried with the label's hypotheses. RETURNN finds the label's dependency on the position only
through the attention, which it may not have seen yet where its templates go round the step's
cycles ("Search choices cannot be compared" between the label and the position, while it builds
the template of `acc`): the label's scores also read the position directly, through zeros
computed from it (`RecLowering._chain_choices`)."""

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


@network
def through_attention(x: Tensor[batch, time, feat], align: Labels[batch, dec, time], y: Labels[batch, dec, vocab]):
    enc = Lstm(model)(x)
    s = zeros(batch, model)
    acc = zeros(batch, time)
    emb = zeros(batch, model)
    ctx = zeros(batch, model)
    labels = []
    for _ in range(x.max_seq_len + 2):
        s = tanh(Linear(model)(s) + Linear(model)(emb) + Linear(model)(ctx))
        energy = reduce_sum(tanh(enc + Linear(model)(s)), axis=model) - acc
        where = choice(energy, target=align, beam=3, input_type="log_prob", length_normalization=False)
        att = softmax(energy + one_hot(where), axis=time)
        acc = acc + att * 0.5
        ctx = dot(att, enc, reduce=time)
        label = choice(Linear(vocab)(s + ctx), target=y, beam=3)
        emb = Embedding(model)(label)
        labels.append(label)
        if end(label == 0):
            break
    return {"output": labels}

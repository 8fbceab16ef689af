"""Two choices in one step (a position, then the label) and a state over the encoder's frames
computed from the position but not the label: accumulated attention weights, as RETURNN's latent
attention configs keep them (`accum_att_weights`, read back through a linear). The state is
carried with the label's hypotheses (`rebeamed_states`). RETURNN selects the frames of an
earlier choice's hypotheses batch-major, while its template of the state's layer came from the
time-major encoder: that layer is batch-major in both (`REBEAM_TYPE_HELPER`), else the state's
batch axis moves between its template and the step (an assertion in the rec layer's
`_construct`)."""

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
def state_batch_axis(x: Tensor[batch, time, feat], align: Labels[batch, dec, time], y: Labels[batch, dec, vocab]):
    enc = Lstm(model)(x)  # time-major in RETURNN
    fertility = sigmoid(Linear(one)(enc))
    s = zeros(batch, model)
    acc = zeros(batch, time, one)
    emb = zeros(batch, model)
    labels, positions = [], []
    for _ in range(x.max_seq_len + 2):
        s = tanh(Linear(model)(s) + Linear(model)(emb))
        energy = reduce_sum(tanh(enc + Linear(model)(s) + Linear(model)(acc)), axis=model)
        where = choice(energy, target=align, beam=3, input_type="log_prob", length_normalization=False)
        att = softmax(energy + one_hot(where), axis=time)
        acc = acc + att * fertility * 0.5  # from the position, not the label
        label = choice(Linear(vocab)(s + dot(att, enc, reduce=time)), target=y, beam=3)
        emb = Embedding(model)(label)
        labels.append(label)
        positions.append(where)
        if end(label == 0):
            break
    return {"output": labels, "positions": positions}

"""A position `choice` whose label only a state reads, and that state only the position's scores
(a coverage of the positions chosen so far): nothing returned depends on them, but the search
does, since the position's choice prunes the hypotheses. Dead-code removal keeps what a
`choice`'s scores read (a `choice` always stays): it removed the state and left its read
undefined (an IRError while compiling)."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Lstm,
    Tensor,
    batch,
    choice,
    end,
    network,
    one_hot,
    reduce_sum,
    tanh,
    zeros,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 6)
model = Dim("model", 5)
vocab = Dim("vocab", 7)


@network
def position_only_in_state(x: Tensor[batch, time, feat], align: Labels[batch, dec, time], y: Labels[batch, dec, vocab]):
    enc = Lstm(model)(x)
    s = zeros(batch, model)
    coverage = zeros(batch, time)
    labels = []
    for _ in range(x.max_seq_len + 2):
        energy = reduce_sum(tanh(enc + Linear(model)(s)), axis=model) - coverage
        where = choice(energy, target=align, beam=3, input_type="log_prob", length_normalization=False)
        coverage = coverage + one_hot(where)
        label = choice(Linear(vocab)(s), target=y, beam=3)
        s = tanh(Linear(model)(s) + Embedding(model)(label))
        labels.append(label)
        if end(label == 0):
            break
    return {"output": labels}

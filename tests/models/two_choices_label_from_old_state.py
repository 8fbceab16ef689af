"""Two choices in one step where the second does not read the first: the label is scored from
attention on the state the step began with (computed before the position's choice), the
position's choice updates the state. Searching, the label's choice still extends the hypotheses
the position's choice made (their scores follow those hypotheses). RETURNN orders a step's
choices by their dependencies alone: its scores read through a layer that also reads the
position's choice (`RecLowering._chain_choices`), else the state, computed from both choices,
has two search choices RETURNN cannot compare."""

from netc import (
    Dim,
    Embedding,
    GruCell,
    Labels,
    Linear,
    Tensor,
    argmax,
    batch,
    choice,
    dot,
    end,
    network,
    one_hot,
    softmax,
    zeros,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 6)
hidden = Dim("hidden", 4)
vocab = Dim("vocab", 5)
emb = Dim("emb", 3)


@network
def label_from_old_state(x: Tensor[feat, batch, time], y: Labels[batch, dec, vocab], align: Labels[batch, dec, time]):
    enc = 0.1 * x
    s = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)
    labels, positions = [], []
    for _ in range(2 * x.max_seq_len + 2):
        att = dot(enc, Linear(feat)(s), reduce=feat)
        context = dot(att, enc, reduce=time)  # from the state before this step's choices
        s = GruCell(hidden)(Embedding(emb)(label), s)
        pos_scores = dot(x, Linear(feat)(s), reduce=feat)
        where = choice(softmax(pos_scores, axis=time), target=align, beam=2, input_type="prob")
        s = s + Linear(hidden)(dot(one_hot(where), x, reduce=time))
        positions.append(where)
        label = choice(Linear(vocab)(context), target=y, beam=2)  # reads nothing of `where`
        labels.append(label)
        if end(label == 1):
            break
    return {"output": labels, "positions": positions}

"""Arithmetic on labels gives plain ints: a state of the largest label so far (`maximum` of the
chosen label and the state, which starts at -1) and `top + 1` stacked. RETURNN's `combine` and
`eval` keep their first source's class dim unless told, so the state's next value was labels and
its initial value not (RETURNN's search and training failed building the loop)."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    cross_entropy,
    end,
    full,
    mark_as_loss,
    maximum,
    network,
    tanh,
    zeros,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 3)
vocab = Dim("vocab", 5)
hidden = Dim("hidden", 4)


@network
def label_arith_state(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    s = zeros(batch, hidden)
    top = full(batch, value=-1, dtype="int32")  # the largest label so far
    out, tops, logits = [], [], []
    for _ in range(x.max_seq_len + 2):
        scores = Linear(vocab)(s)
        logits.append(scores)
        label = choice(scores, target=y, beam=2)
        top = maximum(label, top)
        s = tanh(Linear(hidden)(s) + Embedding(hidden)(label))
        out.append(label)
        tops.append(top + 1)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": out, "tops": tops}

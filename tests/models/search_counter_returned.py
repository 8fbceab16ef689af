"""A searched decoder that counts its steps (a state not reading the chosen labels, which also
ends the loop), stacks the count and returns its last value and a `where` of it. RETURNN's search
once stacked the count without the beam and built the values after the loop per hypothesis
(TensorFlow: "condition [6], then [3] ... must be broadcastable")."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    argmax,
    batch,
    choice,
    end,
    network,
    reduce_max,
    tanh,
    where,
    zeros,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 3)
hidden = Dim("hidden", 5)
BEAM = 2


@network
def search_counter_returned(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    m = reduce_max(x, axis=time)
    cnt = zeros(batch)
    label = argmax(zeros(batch, vocab), axis=vocab)
    out, counts = [], []
    for _ in range(3 * x.max_seq_len):
        cnt = cnt + 1.0
        label = choice(Linear(vocab)(tanh(Linear(hidden)(m) + Embedding(hidden)(label))), target=y, beam=BEAM)
        out.append(label)
        counts.append(cnt)
        if end(cnt >= 3.0):
            break
    return {"out": out, "counts": counts, "cnt": cnt, "capped": where(cnt > 2.0, cnt, 0.0 * cnt)}

"""Two choices in one decoder step (hard attention): each step first chooses a position (trained
on `pos_target`), reads it (its embedding), then chooses the label (trained on `y`); the loop
runs over the first choice's target's dim. Searching, the label's choice extends the hypotheses
the position's choice made, each pruned to the beam (RETURNN's `choice` layers in one unit). The
state is updated from the position, not the label: RETURNN carries it with the hypotheses of the
step's last choice (a copy reading that choice). The labels are no state (their embedding is):
the rec unit's `output`, whose hypotheses RETURNN's search follows, is the label's choice."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    cross_entropy,
    dot,
    end,
    mark_as_loss,
    network,
    softmax,
    tanh,
    zeros,
)

enc_time = Dim("enc_time")
dec_time = Dim("dec_time")
feat = Dim("feat", 6)
vocab = Dim("vocab", 7)
pos = Dim("pos", 4)
model = Dim("model", 5)


@network
def two_choices(
    x: Tensor[batch, enc_time, feat], pos_target: Labels[batch, dec_time, pos], y: Labels[batch, dec_time, vocab]
):
    enc = tanh(Linear(model)(x))
    s = zeros(batch, model)
    emb = zeros(batch, model)  # the previous label's embedding: the label itself is no state
    labels, positions, logits, pos_logits = [], [], [], []
    for _ in range(x.max_seq_len + 2):
        att = softmax(dot(s, enc, reduce=model), axis=enc_time)
        context = dot(att, enc, reduce=enc_time)
        s = tanh(emb + Linear(model, with_bias=False)(s) + context)
        pos_scores = Linear(pos)(s)
        pos_logits.append(pos_scores)
        where = choice(pos_scores, target=pos_target, beam=3)
        h = tanh(Embedding(model)(where) + s)
        s = 0.5 * (s + h)  # the state follows the position chosen (carried with the label's hypotheses)
        scores = Linear(vocab)(s)
        logits.append(scores)
        label = choice(scores, target=y, beam=3)
        emb = Embedding(model)(label)
        labels.append(label)
        positions.append(where)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(pos_logits, pos_target, axis=pos), "pos_ce")
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels, "positions": positions, "logits": logits}

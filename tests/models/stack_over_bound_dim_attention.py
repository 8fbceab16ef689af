"""Loops with `end` under a bound from a sequence's length (`range(n * x.max_seq_len + m)`)
stacking values over that sequence's dim: attention weights over `enc_time`, the sequence
scaled. Such a loop's stacks get a dim of their own (a decoder's: its target's), not the
bound's, so nothing is stacked over a dim it already has; the parser refused them ("cannot
stack [batch, enc_time] over `enc_time`"). Eagerly, the first loop's lists were taken for the
decoder's: eager mode looked for them in the search graph, which drops that loop (a search
computes only what it returns). Training here, the decoder also searched (test_decoders_searched)."""

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
    full,
    mark_as_loss,
    network,
    reduce_mean,
    softmax,
    tanh,
    zeros,
)

enc_time = Dim("enc_time")
time = Dim("time")
vocab = Dim("vocab", 5)
hidden = Dim("hidden", 4)


@network
def stack_over_bound_dim_attention(x: Tensor[batch, enc_time, hidden], y: Labels[batch, time, vocab]):
    s = zeros(batch, hidden)
    atts, seqs = [], []
    for _ in range(2 * x.max_seq_len + 1):
        att = softmax(dot(x, s, reduce=hidden), axis=enc_time)
        s = tanh(dot(att, x, reduce=enc_time) + Linear(hidden)(s))
        atts.append(att)
        seqs.append(x * reduce_mean(s, axis=hidden))
        if end(reduce_mean(s, axis=hidden) > 0.23):
            break

    label = full(batch, value=0, class_dim=vocab)
    h = zeros(batch, hidden)
    logits, labels, weights = [], [], []
    for _ in range(x.max_seq_len + 3):
        w = softmax(dot(x, h, reduce=hidden), axis=enc_time)
        h = tanh(Embedding(hidden)(label) + dot(w, x, reduce=enc_time) + Linear(hidden)(h))
        scores = Linear(vocab)(h)
        logits.append(scores)
        label = choice(scores, target=y, beam=3)
        labels.append(label)
        weights.append(w)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"atts": atts, "seqs": seqs, "labels": labels, "weights": weights}

"""examples/beam_search.py with an inner loop in the searched step: a gate per encoder frame
from the state, stacked and used in the step (RETURNN searches it; an inner *state* computed
from the labels is a located error: tests/test_search_errors.py)."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    argmax,
    batch,
    choice,
    concat,
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
emb = Dim("emb", 5)
hidden = Dim("hidden", 8)
EOS = 0


@network
def search_nested_stack(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc = tanh(Linear(hidden)(x))
    s = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)  # BOS: label 0
    logits = []
    labels = []
    for _ in range(2 * x.max_seq_len):
        q = Linear(hidden)(s)
        gates = []
        for e_t in enc:  # per step: a gate per encoder frame from the state
            gates.append(tanh(e_t * q))
        att = softmax(dot(enc, q, reduce=hidden) + dot(gates, enc, reduce=hidden), axis=enc_time)
        context = dot(att, enc, reduce=enc_time)
        s = tanh(Linear(hidden)(concat(Embedding(emb)(label), context)) + Linear(hidden, with_bias=False)(s))
        scores = Linear(vocab)(concat(s, context))
        logits.append(scores)
        label = choice(scores, target=y, beam=4)
        labels.append(label)
        if end(label == EOS):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels, "logits": logits}

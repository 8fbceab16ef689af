"""A decoder that stacks a value no step changes: searched, its stack is per hypothesis."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    argmax,
    batch,
    choice,
    cross_entropy,
    end,
    mark_as_loss,
    network,
    reduce_sum,
    tanh,
    zeros,
)

enc_time = Dim("enc_time")
dec_time = Dim("dec_time")
feat = Dim("feat", 6)
vocab = Dim("vocab", 7)
emb = Dim("emb", 5)
hidden = Dim("hidden", 8)


@network
def invariant_search_stack(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    m = reduce_sum(x, axis=enc_time)
    s = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)
    logits = []
    labels = []
    summary = []
    for _ in range(2 * x.max_seq_len):
        s = tanh(Linear(hidden)(Embedding(emb)(label)) + Linear(hidden, with_bias=False)(s))
        scores = Linear(vocab)(s)
        logits.append(scores)
        summary.append(tanh(Linear(hidden)(m)))
        label = choice(scores, target=y, beam=3)
        labels.append(label)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels, "summary": summary}

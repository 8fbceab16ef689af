"""`searching()` in a decoder, its value read in the loop: an `if` on it with a state only the
search advances (not computed in training), `where` on it over an encoder value (the search reads the other branch than training), and `choice` over
probabilities (`input_type="prob"`, the search takes their log); a loss of the probabilities times the
target's one-hot labels (an imported `ce` on probabilities: nothing of it exists while searching)."""

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
    end,
    log,
    mark_as_loss,
    maximum,
    network,
    one_hot,
    reduce_mean,
    reduce_sum,
    searching,
    softmax,
    stack,
    tanh,
    where,
    zeros,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 3)
vocab = Dim("vocab", 5)
emb = Dim("emb", 3)
hidden = Dim("hidden", 6)


@network
def search_only_prob(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    enc = reduce_mean(tanh(Linear(hidden)(x)), axis=time)
    flag = searching()  # read in the loop: decided there too
    ctx = where(flag, 0.5 * enc, enc)
    s = zeros(batch, hidden)
    lm = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)
    probs, labels = [], []
    for _ in range(2 * x.max_seq_len):
        s = tanh(Linear(hidden)(concat(Embedding(emb)(label), ctx)) + Linear(hidden, with_bias=False)(s))
        p = softmax(Linear(vocab)(s), axis=vocab)
        probs.append(p)
        if flag:
            lm = tanh(Linear(hidden)(Embedding(emb)(label)) + Linear(hidden, with_bias=False)(lm))
            p = 0.5 * p + 0.5 * softmax(Linear(vocab)(lm), axis=vocab)  # a mixture: still probabilities
        label = choice(p, target=y, beam=3, input_type="prob")
        labels.append(label)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(log(probs), y, axis=vocab), "ce")
    mark_as_loss(-log(maximum(reduce_sum(stack(probs) * one_hot(y), axis=vocab), 1e-20)), "ce_probs")
    return {"output": labels, "probs": probs}

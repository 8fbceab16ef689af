"""A greedy decoder: each sequence emits labels until it emits `eos` (at most twice its input length).

The encoder is a tanh RNN; its last state starts the decoder, which feeds back the
embedding of its own argmax. The ending step is part of the output (`append` before `break`).
"""

from netc import Dim, Embedding, Linear, Tensor, argmax, batch, concat, end, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 10)
hidden = Dim("hidden", 16)
emb = Dim("emb", 8)
vocab = Dim("vocab", 6)
EOS = 0


@network
def greedy_decoder(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    for x_t in x:
        h = tanh(Linear(hidden)(x_t) + Linear(hidden, with_bias=False)(h))
    y = argmax(Linear(vocab)(h), axis=vocab)
    labels = []
    for _step in range(2 * x.max_seq_len):
        h = tanh(Linear(hidden)(concat(Embedding(emb)(y), h)))
        y = argmax(Linear(vocab)(h), axis=vocab)
        labels.append(y)
        if end(y == EOS):
            break
    return {"output": labels, "state": h}

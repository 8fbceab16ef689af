"""A decoder whose states shift: the label embeddings of the last three steps, each state's next
value the previous value of the one before it (`e2 = e1_prev`), as an imported feed-forward
decoder's (`prev_1_target_embed`, `prev_2_target_embed`). The states take their next values at
once: the torch module assigned them one by one (`e1 = e0` read the new `e0`) and, searching,
re-selected a state's previous value for the new hypotheses after it was overwritten."""

from netc import Dim, Embedding, Labels, Linear, Tensor, batch, choice, concat, end, network, tanh, zeros

time = Dim("time")
feat = Dim("feat", 4)
dec = Dim("dec")
vocab = Dim("vocab", 6)
emb = Dim("emb", 3)
hidden = Dim("hidden", 5)


@network
def state_shift_decoder(y: Labels[batch, dec, vocab], x: Tensor[batch, time, feat]):
    e0 = zeros(batch, emb)
    e1 = zeros(batch, emb)
    e2 = zeros(batch, emb)
    labels, hs = [], []
    for _ in range(x.max_seq_len):
        e0_prev = e0
        e1_prev = e1
        h = tanh(Linear(hidden)(concat(e0_prev, e1_prev, e2)))
        label = choice(Linear(vocab)(h), target=y, beam=4)
        e0 = Embedding(emb)(label)
        e1 = e0_prev
        e2 = e1_prev
        labels.append(label)
        hs.append(h)
        if end(label == 0):
            break
    return {"labels": labels, "hs": hs}

"""A decoder state concatenated with an invariant over a concat's dim (`hid + hid`): the search's own
passes split the concat (`feat + hid`), a dim only the search network has (a KeyError in the RETURNN
emitter before)."""

from netc import Dim, Labels, Linear, Tensor, batch, choice, concat, end, network, one_hot, reduce_mean, tanh, zeros

time = Dim("time")
ytime = Dim("ytime")
feat = Dim("feat", 3)
hid = Dim("hid", 4)
vocab = Dim("vocab", 5)


@network
def search_concat_made_dim(x: Tensor[batch, time, feat], y: Labels[batch, ytime, vocab]):
    a = tanh(Linear(hid)(x))
    enc = concat(a, a)
    enc_mean = reduce_mean(enc, axis=time)
    emb = zeros(batch, feat)
    s = zeros(batch, hid)
    out = []
    for _ in range(enc.max_seq_len):
        s = tanh(Linear(hid)(concat(emb, s, enc_mean)))
        o = choice(Linear(vocab)(s), target=y, beam=3)
        emb = Linear(feat)(one_hot(o))
        out.append(o)
        if end(o == 0):
            break
    return {"output": out}

"""A transducer streamed (tests/test_streaming.py): a recurrent encoder (a loop over frames, its
state a cache) and `transducer_search`'s prediction and joint networks as step modules, the
search on the host. `METHOD`, `BEAM`, `MAX_SYM` as the test sets them."""

from netc import Dim, Embedding, Linear, Module, Tensor, batch, concat, network, tanh, transducer_search, zeros

time = Dim("time")
dec_time = Dim("dec_time")  # the labels found
feat = Dim("feat", 4)
vocab = Dim("vocab", 4)
blank = Dim("blank", 1)
emb = Dim("emb", 3)
hidden = Dim("hidden", 5)
BLANK = 4  # the last class of vocab + blank
BOS = 0
METHOD = "greedy"
BEAM = 1
MAX_SYM = 2


class Prediction(Module):
    def __init__(self):
        self.embed = Embedding(emb)
        self.step = Linear(hidden)

    def __call__(self, label, s):
        s = tanh(self.step(concat(self.embed(label), s)))
        return s, s


class Joint(Module):
    def __init__(self):
        self.enc = Linear(hidden)
        self.pred = Linear(hidden, with_bias=False)
        self.out = Linear(vocab + blank)

    def __call__(self, enc, pred):
        return self.out(tanh(self.enc(enc) + self.pred(pred)))


@network
def stream_transducer(x: Tensor[batch, time, feat]):
    h = zeros(batch, hidden)
    enc = []
    for x_t in x:
        h = tanh(Linear(hidden)(x_t) + Linear(hidden, with_bias=False)(h))
        enc.append(h)
    labels, scores = transducer_search(
        enc,
        axis=time,
        predict=Prediction(),
        joint=Joint(),
        state=zeros(batch, hidden),
        label_dim=vocab,
        start=BOS,
        blank=BLANK,
        beam=BEAM,
        method=METHOD,
        max_sym_per_frame=MAX_SYM,
        out_axis=dec_time,
    )
    return {"labels": labels, "scores": scores}

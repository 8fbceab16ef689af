"""A transducer's decoder for bench_transducer.py: the encoder's output as input (256 features),
an LSTM prediction network (an embedding and a step written out, 320 units, from BOS = 0) and a
joint network (320 units, tanh) over vocab 500 + blank (the last class), searched by
`transducer_search` (METHOD, BEAM, MAX_SYM: the script sets them)."""

from netc import (
    Dim,
    Embedding,
    Linear,
    Module,
    Tensor,
    batch,
    network,
    sigmoid,
    split,
    tanh,
    transducer_search,
    zeros,
)

time = Dim("time")
dec_time = Dim("dec_time")
enc_dim = Dim("enc", 256)
vocab = Dim("vocab", 500)
blank = Dim("blank", 1)
emb = Dim("emb", 128)
pred_dim = Dim("pred", 320)
joint_dim = Dim("joint", 320)
BLANK = 500
METHOD = "time_sync"
BEAM = 4
MAX_SYM = 3


class Prediction(Module):
    def __init__(self):
        self.embedding = Embedding(emb)
        self.ff_linear = Linear(4 * pred_dim)
        self.rec_linear = Linear(4 * pred_dim, with_bias=False)

    def __call__(self, label, state):
        h, c = state
        x_in, g_in, g_forget, g_out = split(self.ff_linear(self.embedding(label)) + self.rec_linear(h), 4)
        c = c * sigmoid(g_forget) + tanh(x_in) * sigmoid(g_in)
        h = tanh(c) * sigmoid(g_out)
        return h, (h, c)


class Joint(Module):
    def __init__(self):
        self.enc_proj = Linear(joint_dim)
        self.pred_proj = Linear(joint_dim, with_bias=False)
        self.out = Linear(vocab + blank)

    def __call__(self, enc, pred):
        return self.out(tanh(self.enc_proj(enc) + self.pred_proj(pred)))


@network
def transducer_decoder(enc: Tensor[batch, time, enc_dim]):
    prediction = Prediction()
    joint = Joint()
    labels, scores = transducer_search(
        enc,
        axis=time,
        predict=prediction,
        joint=joint,
        state=(zeros(batch, pred_dim), zeros(batch, pred_dim)),
        label_dim=vocab,
        start=0,
        blank=BLANK,
        beam=BEAM,
        method=METHOD,
        max_sym_per_frame=MAX_SYM,
        out_axis=dec_time,
    )
    return {"labels": labels, "scores": scores}

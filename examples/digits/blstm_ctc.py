"""A BLSTM acoustic model with CTC for the spoken-digit recipe (run.py): whole-sequence.

40 log-mel features per 10 ms frame; a `Linear` and a BLSTM at the frame rate, max-pooled over
time to half the frames, a second BLSTM, pooled again (a quarter of the frames: 40 ms per encoder
frame), a third BLSTM, and a `Linear` to the ten digits plus CTC's blank.

`blstm_ctc` is the training network (its `ctc` loss summed over the batch); `blstm_ctc_decode`
has the same modules, so the same parameters, and decodes: `greedy` the best path's labels,
`labels` the best prefix of a CTC prefix beam search (`BEAM` prefixes).
"""

from netc import (
    Dim,
    Labels,
    Linear,
    Lstm,
    Module,
    Tensor,
    batch,
    concat,
    ctc_greedy,
    ctc_loss,
    ctc_prefix_search,
    dropout,
    log_softmax,
    mark_as_loss,
    max_pool,
    network,
    relu,
)

DROPOUT = 0.1
BEAM = 4  # prefixes the prefix beam search keeps

time = Dim("time")  # 10 ms frames
pool_time = Dim("pool_time")  # ceil(time / 2)
enc_time = Dim("enc_time")  # ceil(time / 4)
label_time = Dim("label_time")  # the reference digits
greedy_time = Dim("greedy_time")  # the decoded digits: greedy
search_time = Dim("search_time")  # and by prefix beam search
feat = Dim("feat", 40)  # log-mel bands
hidden = Dim("hidden", 64)  # the input projection
lstm = Dim("lstm", 64)  # per direction
vocab = Dim("vocab", 10)  # the digits 0-9
blank = Dim("blank", 1)  # CTC's blank, after the digits


class BLstm(Module):
    """A forward and a backward LSTM over the same input, concatenated."""

    def __init__(self):
        self.fw = Lstm(lstm)
        self.bw = Lstm(lstm, direction=-1)

    def __call__(self, x):
        x = dropout(x, DROPOUT)
        return concat(self.fw(x), self.bw(x))


class Encoder(Module):
    def __init__(self):
        self.proj = Linear(hidden)
        self.blstm1 = BLstm()
        self.blstm2 = BLstm()
        self.blstm3 = BLstm()
        self.logits = Linear(vocab + blank)

    def __call__(self, x):
        h = relu(self.proj(x))
        h = max_pool(self.blstm1(h), axis=time, size=2, out_axis=pool_time)
        h = max_pool(self.blstm2(h), axis=pool_time, size=2, out_axis=enc_time)
        return self.logits(dropout(self.blstm3(h), DROPOUT))  # [batch, enc_time, vocab + blank]


@network
def blstm_ctc(x: Tensor[batch, time, feat], y: Labels[batch, label_time, vocab]):
    encoder = Encoder()
    logits = encoder(x)
    mark_as_loss(ctc_loss(logits, y, axis=vocab + blank), "ctc")
    return {"output": log_softmax(logits, axis=vocab + blank)}


@network
def blstm_ctc_decode(x: Tensor[batch, time, feat]):
    encoder = Encoder()
    logits = encoder(x)
    greedy = ctc_greedy(logits, axis=vocab + blank, out_axis=greedy_time)
    labels, score = ctc_prefix_search(logits, axis=vocab + blank, beam=BEAM, out_axis=search_time)
    return {"greedy": greedy, "labels": labels, "score": score}

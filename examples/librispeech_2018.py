"""The RWTH LibriSpeech attention system (Zeyer et al. 2018) at reduced dims.

The network of rwth-i6/returnn-experiments, 2018-asr-attention/librispeech/full-setup-attention/
returnn.config, layer by layer: a 6-layer BLSTM encoder with max-pooling over time after layers
0, 1 and 2 (8x fewer frames; its pools of size 1 are identities and left out), `enc_ctx`,
`inv_fertility`, an attention decoder with weight feedback from the accumulated attention
weights, the `s` LSTM cell, `readout_in` with maxout, `output_prob` trained with label smoothing,
a CTC loss on the encoder, and the label `choice`: the reference label in training, a beam search
of 12 when searching, ending at label 0 (EOS). Dims are the original's / 32 (vocab: 10025 BPE
labels there). tests/test_librispeech.py builds the original RETURNN network and checks this
file against it.
"""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Lstm,
    LstmCell,
    Module,
    Tensor,
    batch,
    choice,
    clip,
    concat,
    cross_entropy,
    ctc_loss,
    dot,
    dropout,
    end,
    mark_as_loss,
    max_pool,
    merge_dims,
    network,
    reduce_max,
    sigmoid,
    softmax,
    split_dims,
    stack,
    tanh,
    zeros,
)

time = Dim("time")  # input frames
pool0_time = Dim("pool0_time")  # after lstm0_pool: ceil(time / 2)
pool1_time = Dim("pool1_time")  # after lstm1_pool
enc_time = Dim("enc_time")  # after lstm2_pool: ceil(time / 8)
dec_time = Dim("dec_time")  # labels
feat = Dim("feat", 40)  # num_inputs
lstm = Dim("lstm", 32)  # LstmDim 1024, per direction
enc = lstm + lstm  # the encoder's output: forward and backward
key = Dim("key", 32)  # EncKeyTotalDim 1024
heads = Dim("heads", 1)  # AttNumHeads
value = Dim("value", 64)  # EncValuePerHeadDim 2048
emb = Dim("emb", 20)  # target_embed 621
dec = Dim("dec", 32)  # s 1000
readout = Dim("readout", 32)  # readout_in 1000
half, pieces = Dim("half", 16), Dim("pieces", 2)  # readout: maxout over 2 pieces
vocab = Dim("vocab", 24)  # BPE labels, EOS = 0
blank = Dim("blank", 1)  # CTC's blank, after the labels


class BLstm(Module):
    """`lstm<i>_fw` and `lstm<i>_bw` (RETURNN `nativelstm2`), each with its own dropout on its
    input, concatenated as the next layer's `from`."""

    def __init__(self, drop=0.0):
        self.fw = Lstm(lstm)
        self.bw = Lstm(lstm, direction=-1)
        self.drop = drop

    def __call__(self, x):
        if self.drop:
            return concat(self.fw(dropout(x, self.drop)), self.bw(dropout(x, self.drop)))
        return concat(self.fw(x), self.bw(x))


@network
def librispeech(x: Tensor[batch, time, feat], y: Labels[batch, dec_time, vocab]):
    source = clip(x, -3.0, 3.0)
    lstm0 = BLstm()(source)
    lstm0_pool = max_pool(lstm0, axis=time, size=2, out_axis=pool0_time)
    lstm1 = BLstm(0.3)(lstm0_pool)
    lstm1_pool = max_pool(lstm1, axis=pool0_time, size=2, out_axis=pool1_time)
    lstm2 = BLstm(0.3)(lstm1_pool)
    lstm2_pool = max_pool(lstm2, axis=pool1_time, size=2, out_axis=enc_time)
    lstm3 = BLstm(0.3)(lstm2_pool)
    lstm4 = BLstm(0.3)(lstm3)
    encoder = BLstm(0.3)(lstm4)  # lstm5
    enc_ctx = Linear(key)(encoder)
    inv_fertility = sigmoid(Linear(heads, with_bias=False)(encoder))
    enc_value = split_dims(encoder, axis=enc, dims=(heads, value))

    # the decoder (RETURNN's rec layer `output`); each state starts at zero
    accum_att_weights = zeros(batch, enc_time, heads)
    target_embed = zeros(batch, emb)
    att = zeros(batch, enc)
    s, s_c = zeros(batch, dec), zeros(batch, dec)
    logits, labels = [], []
    for _ in range(2 * x.max_seq_len):  # training: y's frames; searching: until label 0, at most this
        s, s_c = LstmCell(dec)(concat(target_embed, att), (s, s_c))  # from the previous step's
        weight_feedback = Linear(key, with_bias=False)(accum_att_weights)
        s_transformed = Linear(key, with_bias=False)(s)
        energy = Linear(heads, with_bias=False)(tanh(enc_ctx + weight_feedback + s_transformed))
        att_weights = softmax(energy, axis=enc_time)
        accum_att_weights = accum_att_weights + att_weights * inv_fertility * 0.5
        att = merge_dims(dot(att_weights, enc_value, reduce=enc_time), dims=(heads, value), out_dim=enc)
        readout_in = Linear(readout)(concat(s, target_embed, att))
        readout_out = reduce_max(split_dims(readout_in, axis=readout, dims=(half, pieces)), axis=pieces)
        output_prob = Linear(vocab)(dropout(readout_out, 0.3))  # logits of `output_prob`
        logits.append(output_prob)
        label = choice(output_prob, target=y, beam=12)  # y's label in training, a beam search's otherwise
        labels.append(label)
        target_embed = Embedding(emb)(label)
        if end(label == 0):
            break

    mark_as_loss(cross_entropy(stack(logits), y, axis=vocab, label_smoothing=0.1), "output_prob")
    ctc = Linear(vocab + blank)(encoder)  # logits of `ctc`
    mark_as_loss(ctc_loss(ctc, y, axis=vocab + blank), "ctc")
    probs = softmax(stack(logits), axis=vocab)
    return {"output": probs, "labels": labels, "ctc_prob": softmax(ctc, axis=vocab + blank)}

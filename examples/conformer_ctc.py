"""A Conformer encoder (Gulati et al. 2020) trained with CTC, at small dims.

The encoder as RETURNN's frontend builds it (`rf.ConformerEncoder` with a
`ConformerConvSubsample` front end; tests/test_conformer_rf.py loads these parameters into it
and gets the same encoder output):
- front end: a 3x3 `Conv2d` over (time, feature) with ReLU, a 2x2 max pool (2x fewer frames,
  half the features), a second 3x3 `Conv2d` with ReLU, its feature and channel dims merged and
  projected to the model dim without bias;
- blocks, each: a feed-forward half step, self-attention with relative positional encoding
  (Transformer-XL style, with position biases), the convolution module (pointwise `Linear` to
  twice the model dim, GLU, depthwise `Conv1d`, `BatchNorm`, swish, pointwise `Linear`), a
  second feed-forward half step, a final `LayerNorm`; every part pre-normed, with a residual;
- a `Linear` to the labels plus the blank, and a CTC loss.

`conformer_ctc_decode` decodes with the training network's modules and parameters: greedy (the
best path) and CTC prefix beam search (`BEAM` prefixes). `conformer_ctc_decode_lm` searches with a
small LSTM LM of the labels (`LabelLm`, its own parameters under `lm/`, e.g. trained on text by a
network of its own) fused with weight `LM_WEIGHT`: each prefix carries the LM's state
(torch and eager; RETURNN refuses an LM function: `netc verify --no-returnn`).
"""

from netc import (
    BatchNorm,
    Bias,
    Conv1d,
    Conv2d,
    Dim,
    Embedding,
    Labels,
    LayerNorm,
    Linear,
    LstmCell,
    Module,
    Tensor,
    batch,
    concat,
    cos,
    ctc_greedy,
    ctc_loss,
    ctc_prefix_search,
    dot,
    dropout,
    exp,
    expand,
    glu,
    log_softmax,
    mark_as_loss,
    max_pool,
    merge_dims,
    network,
    range_over,
    reduce_max,
    rel_positions,
    rel_shift,
    relu,
    replace_dim,
    silu,
    sin,
    softmax,
    split_dims,
    zeros,
)

MODEL_SIZE, HEAD_SIZE = 16, 8  # 512 and 64 in the paper
CONV_KERNEL = 7  # the depthwise convolution's filter (32 in the paper)
LOG_STEP = -2.0 * 9.210340371976184 / MODEL_SIZE  # -2 log(10000) / |model|
DROPOUT = 0.1
BEAM = 4  # prefixes the decoder's prefix beam search keeps
LM_WEIGHT = 0.5  # the LM's log probabilities' weight in the search with an LM
BOS = 0  # the label the LM reads first (the sentence boundary)

time = Dim("time")  # input frames
enc_time = Dim("enc_time")  # after the front end's pool: ceil(time / 2)
rel_time = Dim("rel_time")  # relative positions -(n-1) .. n-1 of enc_time: 2n - 1
kv_time1 = Dim("kv_time1")  # each block's keys: its own view of enc_time
kv_time2 = Dim("kv_time2")
label_time = Dim("label_time")
greedy_time = Dim("greedy_time")  # the decoder's labels: greedy
search_time = Dim("search_time")  # and by prefix beam search
lm_time = Dim("lm_time")  # and by prefix beam search with the LM
feat = Dim("feat", 16)  # e.g. log-mel features
one = Dim("one", 1)  # the front end's single input channel
chan1 = Dim("chan1", 4)
chan2 = Dim("chan2", 4)
feat_half = Dim("feat_half", 8)  # features after the pool
pair = Dim("pair", 2)
pooled = Dim("pooled", 32)  # feat_half * chan1
conv_out = Dim("conv_out", 32)  # feat_half * chan2: the front end's output
model = Dim("model", MODEL_SIZE)
pos_half = Dim("pos_half", 8)  # sin and cos halves of the positional encoding
heads = Dim("heads", 2)
head_feat = Dim("head_feat", HEAD_SIZE)
vocab = Dim("vocab", 10)
blank = Dim("blank", 1)  # CTC's blank, after the labels
lm_emb = Dim("lm_emb", 8)
lm_hidden = Dim("lm_hidden", 16)


class FrontEnd(Module):
    """`ConformerConvSubsample(out_dims=[chan1, chan2], filter_sizes=[(3, 3), (3, 3)],
    pool_sizes=[(2, 2)])`: conv, ReLU, max pool, conv, ReLU; then the input projection."""

    def __init__(self):
        self.conv1 = Conv2d(chan1, filter_size=(3, 3))
        self.conv2 = Conv2d(chan2, filter_size=(3, 3))
        self.proj = Linear(model, with_bias=False)

    def __call__(self, x):
        h = relu(self.conv1(expand(x, one), axis=time, feature_axis=feat))  # [batch, time, feat, chan1]
        h = reduce_max_pairs(h)  # [batch, time, feat_half, chan1]
        h = max_pool(merge_dims(h, dims=(feat_half, chan1), out_dim=pooled), axis=time, size=2, out_axis=enc_time)
        h = split_dims(h, axis=pooled, dims=(feat_half, chan1))
        h = relu(self.conv2(h, axis=enc_time, feature_axis=feat_half))  # [batch, enc_time, feat_half, chan2]
        return self.proj(merge_dims(h, dims=(feat_half, chan2), out_dim=conv_out))


def reduce_max_pairs(h):
    """The pool over features: the max of features 2j and 2j+1."""
    return reduce_max(split_dims(h, axis=feat, dims=(feat_half, pair)), axis=pair)


def rel_pos_encoding():
    """Sinusoidal encodings of the relative positions, [batch, rel_time, model]."""
    rel = rel_positions(axis=enc_time, out_axis=rel_time, dtype="float32")
    angles = expand(rel, pos_half) * exp(range_over(pos_half, dtype="float32") * LOG_STEP)
    return concat(sin(angles), cos(angles))


def heads_of(v):
    return split_dims(v, axis=model, dims=(heads, head_feat))


class FeedForward(Module):
    def __init__(self):
        self.linear_ff = Linear(4 * model)
        self.linear_out = Linear(model)

    def __call__(self, x):
        return self.linear_out(dropout(silu(self.linear_ff(x)), DROPOUT))


class RelPosSelfAttention(Module):
    def __init__(self, kv_axis):
        self.kv_axis = kv_axis
        self.query = Linear(model)
        self.key = Linear(model)
        self.value = Linear(model)
        self.linear_pos = Linear(model, with_bias=False)
        self.pos_bias_u = Bias((heads, head_feat))  # Transformer-XL's u and v
        self.pos_bias_v = Bias((heads, head_feat))
        self.proj = Linear(model)

    def __call__(self, x, pos_enc):
        x_kv = replace_dim(x, axis=enc_time, out_axis=self.kv_axis)
        q = heads_of(self.query(x))  # [batch, enc_time, heads, head_feat]
        k = heads_of(self.key(x_kv))  # [batch, kv_time, heads, head_feat]
        v = heads_of(self.value(x_kv))
        pos = heads_of(self.linear_pos(pos_enc))  # [batch, rel_time, heads, head_feat]
        content = dot(self.pos_bias_u(q), k, reduce=head_feat)  # [batch, enc_time, kv_time, heads]
        position = dot(self.pos_bias_v(q), pos, reduce=head_feat)  # [batch, enc_time, rel_time, heads]
        position = rel_shift(position, axis=rel_time, query_axis=enc_time, kv_axis=self.kv_axis)
        w = dropout(softmax((content + position) * HEAD_SIZE**-0.5, axis=self.kv_axis), DROPOUT)
        return self.proj(merge_dims(dot(w, v, reduce=self.kv_axis), dims=(heads, head_feat), out_dim=model))


class ConvModule(Module):
    def __init__(self):
        self.positionwise_conv1 = Linear(2 * model)
        self.depthwise_conv = Conv1d(model, CONV_KERNEL, groups=MODEL_SIZE)  # depthwise
        self.norm = BatchNorm()
        self.positionwise_conv2 = Linear(model)

    def __call__(self, x):
        h = glu(self.positionwise_conv1(x), model)
        h = self.norm(self.depthwise_conv(h, axis=enc_time))
        return self.positionwise_conv2(silu(h))


class ConformerBlock(Module):
    def __init__(self, kv_axis):
        self.ffn1 = FeedForward()
        self.ffn1_layer_norm = LayerNorm()
        self.self_att = RelPosSelfAttention(kv_axis)
        self.self_att_layer_norm = LayerNorm()
        self.conv_block = ConvModule()
        self.conv_layer_norm = LayerNorm()
        self.ffn2 = FeedForward()
        self.ffn2_layer_norm = LayerNorm()
        self.final_layer_norm = LayerNorm()

    def __call__(self, x, pos_enc):
        x = 0.5 * dropout(self.ffn1(self.ffn1_layer_norm(x)), DROPOUT) + x
        x = dropout(self.self_att(self.self_att_layer_norm(x), pos_enc), DROPOUT) + x
        x = dropout(self.conv_block(self.conv_layer_norm(x)), DROPOUT) + x
        x = 0.5 * dropout(self.ffn2(self.ffn2_layer_norm(x)), DROPOUT) + x
        return self.final_layer_norm(x)


def encode(frontend, block1, block2, x):
    h = dropout(frontend(x), DROPOUT)  # [batch, enc_time, model]
    pos_enc = rel_pos_encoding()  # shared by the blocks, as rf caches it
    return block2(block1(h, pos_enc), pos_enc)


@network
def conformer_ctc(x: Tensor[batch, time, feat], y: Labels[batch, label_time, vocab]):
    frontend = FrontEnd()
    block1 = ConformerBlock(kv_time1)
    block2 = ConformerBlock(kv_time2)
    encoder = encode(frontend, block1, block2, x)
    logits = Linear(vocab + blank)(encoder)
    mark_as_loss(ctc_loss(logits, y, axis=vocab + blank), "ctc")
    return {"output": log_softmax(logits, axis=vocab + blank), "encoder": encoder}


@network
def conformer_ctc_decode(x: Tensor[batch, time, feat]):
    """The training network's encoder and logits, decoded: `greedy` the best path's labels,
    `labels` and `score` the prefix beam search's best prefix and its log probability."""
    frontend = FrontEnd()
    block1 = ConformerBlock(kv_time1)
    block2 = ConformerBlock(kv_time2)
    encoder = encode(frontend, block1, block2, x)
    logits = Linear(vocab + blank)(encoder)
    greedy = ctc_greedy(logits, axis=vocab + blank, out_axis=greedy_time)
    labels, score = ctc_prefix_search(logits, axis=vocab + blank, beam=BEAM, out_axis=search_time)
    return {"greedy": greedy, "labels": labels, "score": score, "output": log_softmax(logits, axis=vocab + blank)}


class LabelLm(Module):
    """An LSTM LM of the labels, one step: the label's embedding into an LSTM cell, log
    probabilities of the next label."""

    def __init__(self):
        self.embed = Embedding(lm_emb)
        self.lstm = LstmCell(lm_hidden)
        self.out = Linear(vocab)

    def __call__(self, label, state):
        h, c = self.lstm(self.embed(label), state)
        return log_softmax(self.out(h), axis=vocab), (h, c)


@network
def conformer_ctc_decode_lm(x: Tensor[batch, time, feat]):
    """The prefix beam search with the LM: `labels` and `score` (the best prefix's log probability
    plus `LM_WEIGHT` times its LM log probability from `BOS`)."""
    frontend = FrontEnd()
    block1 = ConformerBlock(kv_time1)
    block2 = ConformerBlock(kv_time2)
    encoder = encode(frontend, block1, block2, x)
    logits = Linear(vocab + blank)(encoder)
    lm = LabelLm()
    state = (zeros(batch, lm_hidden), zeros(batch, lm_hidden))
    labels, score = ctc_prefix_search(
        logits, axis=vocab + blank, beam=BEAM, out_axis=lm_time, lm=lm, lm_state=state, lm_weight=LM_WEIGHT, bos=BOS
    )
    return {"labels": labels, "score": score, "output": log_softmax(logits, axis=vocab + blank)}

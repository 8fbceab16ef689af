"""A Conformer attention encoder-decoder (AED): the Conformer encoder of examples/conformer_ctc.py
and a Transformer decoder, at small dims. Each decoder step embeds the previous label (EOS = 0
before the first) with a sinusoidal encoding of its position and runs two pre-norm layers of
causal self-attention over the steps so far (keys and values grown by `cum_concat`),
cross-attention over the encoder and a feed-forward part, then a final `LayerNorm` and the
label scores. `choice` takes the reference label in training (cross entropy with label
smoothing) and searches with a beam otherwise, ending at EOS.

The encoder's two blocks are the same code as in examples/conformer_ctc.py, whose encoder
tests/test_conformer_rf.py checks against RETURNN frontend's `rf.ConformerEncoder`; its front end
subsamples time by a strided convolution (tests/test_conformer_aed_frontend_rf.py checks it against
rf's `ConformerConvSubsample` with strides).
The decoder is rf's `TransformerDecoder` with `share_embedding=True` (the logits' weight is the
label embedding's, transposed): tests/test_transformer_rf.py checks it, teacher-forced, through
tests/models/transformer_decoder.py, this decoder's code on a given encoder output.
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
    Module,
    Tensor,
    batch,
    choice,
    concat,
    cos,
    cross_entropy,
    cum_concat,
    dot,
    dropout,
    empty,
    end,
    exp,
    expand,
    full,
    glu,
    log_softmax,
    mark_as_loss,
    merge_dims,
    network,
    range_over,
    reduce_max,
    rel_positions,
    rel_shift,
    relu,
    replace_dim,
    searching,
    silu,
    sin,
    softmax,
    split,
    split_dims,
    tanh,
    zeros,
)

MODEL_SIZE, HEAD_SIZE = 16, 8  # 512 and 64 in the paper
CONV_KERNEL = 7  # the depthwise convolution's filter (32 in the paper)
LOG_STEP = -2.0 * 9.210340371976184 / MODEL_SIZE  # -2 log(10000) / |model|
DEC_LOG_STEP = -9.210340371976184 / (MODEL_SIZE / 2 - 1)  # rf's: the last frequency is 1 / 10000
DROPOUT = 0.1
EOS = 0

time = Dim("time")  # input frames
enc_time = Dim("enc_time")  # after the front end's time stride 2: ceil(time / 2)
rel_time = Dim("rel_time")  # relative positions -(n-1) .. n-1 of enc_time: 2n - 1
kv_time1 = Dim("kv_time1")  # each block's keys: its own view of enc_time
kv_time2 = Dim("kv_time2")
dec_time = Dim("dec_time")  # labels, EOS last
hist1 = Dim("hist1")  # each decoder layer's keys and values of the steps so far
hist2 = Dim("hist2")
feat = Dim("feat", 16)  # e.g. log-mel features
one = Dim("one", 1)  # the front end's single input channel
chan1 = Dim("chan1", 4)
chan2 = Dim("chan2", 4)
feat_half = Dim("feat_half", 8)  # features after the pool
pair = Dim("pair", 2)
conv_out = Dim("conv_out", 32)  # feat_half * chan2: the front end's output
model = Dim("model", MODEL_SIZE)
pos_half = Dim("pos_half", 8)  # sin and cos halves of the positional encodings
sin_cos = Dim("sin_cos", 2)
heads = Dim("heads", 2)
head_feat = Dim("head_feat", HEAD_SIZE)
vocab = Dim("vocab", 10)  # EOS = 0, also the begin label
lm_emb = Dim("lm_emb", 8)  # the language model's label embedding and state
lm_hidden = Dim("lm_hidden", 16)
LM_SCALE = 0.5  # shallow fusion: AM log-prob + LM_SCALE * LM log-prob
MAX_LM_STEPS = 12  # the language model's search alone: at most this many labels


class FrontEnd(Module):
    """`ConformerConvSubsample(out_dims=[chan1, chan2], filter_sizes=[(3, 3), (3, 3)],
    strides=[(1, 1), (2, 1)], pool_sizes=[(1, 2)])`: conv, ReLU, max pool over the features,
    conv with time stride 2 ("same": each sequence padded by its own length), ReLU; then the
    input projection."""

    def __init__(self):
        self.conv1 = Conv2d(chan1, filter_size=(3, 3))
        self.conv2 = Conv2d(chan2, filter_size=(3, 3), stride=(2, 1))
        self.proj = Linear(model, with_bias=False)

    def __call__(self, x):
        h = relu(self.conv1(expand(x, one), axis=time, feature_axis=feat))  # [batch, time, feat, chan1]
        h = reduce_max_pairs(h)  # [batch, time, feat_half, chan1]
        h = relu(self.conv2(h, axis=time, feature_axis=feat_half, out_axis=enc_time))  # [batch, enc_time, ...]
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


def abs_pos_encoding(pos):
    """The sinusoidal encoding of a decoder step's position pos [batch]: [batch, model]."""
    angles = expand(pos, pos_half) * exp(range_over(pos_half, dtype="float32") * DEC_LOG_STEP)
    enc = split_dims(concat(sin(angles), cos(angles)), axis=pos_half + pos_half, dims=(sin_cos, pos_half))
    return merge_dims(enc, dims=(sin_cos, pos_half), out_dim=model)  # the same numbers, over `model`


class DecoderLayer(Module):
    """A pre-norm Transformer decoder layer, one step: causal self-attention (this step's query
    over the keys and values of the steps so far, this one's included), cross-attention over the
    encoder frames, feed-forward; each with a residual."""

    def __init__(self, hist):
        self.hist = hist
        self.self_att_layer_norm = LayerNorm()
        self.self_att_qkv = Linear(3 * model)
        self.self_att_proj = Linear(model)
        self.cross_att_layer_norm = LayerNorm()
        self.cross_att_query = Linear(model)
        self.cross_att_key = Linear(model)
        self.cross_att_value = Linear(model)
        self.cross_att_proj = Linear(model)
        self.ff_layer_norm = LayerNorm()
        self.ff_in = Linear(4 * model)
        self.ff_out = Linear(model)

    def __call__(self, x, keys, values, encoder):
        q, k, v = split(self.self_att_qkv(self.self_att_layer_norm(x)), 3)
        keys = cum_concat(keys, heads_of(k), axis=self.hist)  # [batch, hist, heads, head_feat]
        values = cum_concat(values, heads_of(v), axis=self.hist)
        w = softmax(dot(keys, heads_of(q), reduce=head_feat) * HEAD_SIZE**-0.5, axis=self.hist)
        x = x + self.self_att_proj(merge_dims(dot(w, values, reduce=self.hist), dims=(heads, head_feat), out_dim=model))

        q = heads_of(self.cross_att_query(self.cross_att_layer_norm(x)))  # [batch, heads, head_feat]
        k = heads_of(self.cross_att_key(encoder))  # [batch, enc_time, heads, head_feat]
        w = dropout(softmax(dot(k, q, reduce=head_feat) * HEAD_SIZE**-0.5, axis=enc_time), DROPOUT)
        context = dot(w, heads_of(self.cross_att_value(encoder)), reduce=enc_time)
        x = x + self.cross_att_proj(merge_dims(context, dims=(heads, head_feat), out_dim=model))

        x = x + self.ff_out(dropout(relu(self.ff_in(self.ff_layer_norm(x))), DROPOUT))
        return x, keys, values


@network
def conformer_aed(x: Tensor[batch, time, feat], y: Labels[batch, dec_time, vocab]):
    frontend = FrontEnd()
    block1 = ConformerBlock(kv_time1)
    block2 = ConformerBlock(kv_time2)
    h = dropout(frontend(x), DROPOUT)  # [batch, enc_time, model]
    pos_enc = rel_pos_encoding()  # shared by the blocks
    encoder = block2(block1(h, pos_enc), pos_enc)

    layer1 = DecoderLayer(hist1)
    layer2 = DecoderLayer(hist2)
    input_embedding = Embedding(model)
    output_logits = Linear(vocab, with_bias=False, weight=input_embedding.weight)  # the embedding's, transposed
    keys1, values1 = empty(batch, hist1, heads, head_feat), empty(batch, hist1, heads, head_feat)
    keys2, values2 = empty(batch, hist2, heads, head_feat), empty(batch, hist2, heads, head_feat)
    label = full(batch, value=EOS, class_dim=vocab)  # the begin label
    pos = zeros(batch)
    logits, labels = [], []
    for _ in range(2 * x.max_seq_len):  # training: y's frames; searching: until EOS, at most this
        d = dropout(input_embedding(label) * MODEL_SIZE**0.5 + abs_pos_encoding(pos), DROPOUT)
        d, keys1, values1 = layer1(d, keys1, values1, encoder)
        d, keys2, values2 = layer2(d, keys2, values2, encoder)
        scores = output_logits(LayerNorm()(d))
        logits.append(scores)
        label = choice(scores, target=y, beam=4)
        labels.append(label)
        pos = pos + 1.0
        if end(label == EOS):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab, label_smoothing=0.1), "ce")
    return {"output": softmax(logits, axis=vocab), "labels": labels}


class RecurrentLm(Module):
    """One step of the LM: the next label's log-probabilities and the new state."""

    def __init__(self):
        self.embed = Embedding(lm_emb)
        self.rec = Linear(lm_hidden)
        self.out = Linear(vocab)

    def __call__(self, label, h):
        h = tanh(self.rec(concat(self.embed(label), h)))
        return log_softmax(self.out(h), axis=vocab), h


@network
def conformer_aed_lm(y: Labels[batch, dec_time, vocab]):
    lm = RecurrentLm()
    h = zeros(batch, lm_hidden)
    label = full(batch, value=EOS, class_dim=vocab)  # the begin label
    logp, labels = [], []
    for _ in range(MAX_LM_STEPS):  # training: y's frames; searching: until EOS
        scores, h = lm(label, h)
        logp.append(scores)
        label = choice(scores, target=y, beam=4, input_type="log_prob")
        labels.append(label)
        if end(label == EOS):
            break
    mark_as_loss(cross_entropy(logp, y, axis=vocab), "ce")
    return {"output": labels, "logp": logp}


@network
def conformer_aed_fused(x: Tensor[batch, time, feat], y: Labels[batch, dec_time, vocab]):
    frontend = FrontEnd()
    block1 = ConformerBlock(kv_time1)
    block2 = ConformerBlock(kv_time2)
    h = dropout(frontend(x), DROPOUT)  # [batch, enc_time, model]
    pos_enc = rel_pos_encoding()  # shared by the blocks
    encoder = block2(block1(h, pos_enc), pos_enc)

    layer1 = DecoderLayer(hist1)
    layer2 = DecoderLayer(hist2)
    input_embedding = Embedding(model)
    output_logits = Linear(vocab, with_bias=False, weight=input_embedding.weight)  # the embedding's, transposed
    lm = RecurrentLm()
    keys1, values1 = empty(batch, hist1, heads, head_feat), empty(batch, hist1, heads, head_feat)
    keys2, values2 = empty(batch, hist2, heads, head_feat), empty(batch, hist2, heads, head_feat)
    lm_h = zeros(batch, lm_hidden)
    label = full(batch, value=EOS, class_dim=vocab)  # the begin label
    pos = zeros(batch)
    am, labels = [], []
    for _ in range(2 * x.max_seq_len):  # training: y's frames; searching: until EOS, at most this
        d = dropout(input_embedding(label) * MODEL_SIZE**0.5 + abs_pos_encoding(pos), DROPOUT)
        d, keys1, values1 = layer1(d, keys1, values1, encoder)
        d, keys2, values2 = layer2(d, keys2, values2, encoder)
        scores = output_logits(LayerNorm()(d))
        am_logp = log_softmax(scores, axis=vocab)
        am.append(am_logp)
        if searching():  # the LM runs only in the search
            lm_logp, lm_h = lm(label, lm_h)
            fused = am_logp + LM_SCALE * lm_logp
        else:
            fused = am_logp
        label = choice(fused, target=y, beam=4, input_type="log_prob", length_normalization=False)
        labels.append(label)
        pos = pos + 1.0
        if end(label == EOS):
            break
    mark_as_loss(cross_entropy(am, y, axis=vocab, label_smoothing=0.1), "ce")
    return {"output": labels, "am": am}

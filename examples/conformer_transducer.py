"""A Conformer transducer (RNN-T): the Conformer encoder of examples/conformer_ctc.py, an LSTM
prediction network over the labels with a begin label in front, a joint network over every
(encoder frame, prediction step) pair, and the RNN-T loss, at small dims; and its decoders, from
the same modules with the same parameters (a checkpoint of training decodes):

- `conformer_transducer` trains: the prediction network one label at a time in a loop whose steps
  stack the joint network's scores over all encoder frames (the compiler moves the joint out of the
  loop and runs the loop, an LSTM, as one native op);
- `conformer_transducer_search` decodes one label per encoder frame (RNA-style, as RETURNN's
  transducer setups do): a `choice` over the labels and the blank at each frame, a beam of BEAM
  (1: greedy), the prediction network advanced only on a label (`netc verify --network
  conformer_transducer_search --search`);
- `conformer_transducer_greedy` decodes greedily, time-synchronously: at each encoder frame up to 3
  symbols, until the blank;
- `conformer_transducer_modified`, `_time_sync` and `_graves` decode with `transducer_search`,
  which takes the prediction network (`Prediction`) and the joint network (`Joint`) as they are:
  icefall's modified beam search (one symbol per frame per hypothesis, equal labels merged),
  time-synchronous beam search and torchaudio's `RNNTBeamSearch` (both up to 3 labels per frame),
  a beam of BEAM (torch and eager; RETURNN refuses `transducer_search` at compile).

The prediction network's LSTM is a step written out, so that the decoders keep its state where
they choose the blank; the decoders' loops have the training loop's name (their first stacked list,
`logits`), as RETURNN names a loop's parameters after it. The encoder (front end, two blocks) is
the same code as in examples/conformer_ctc.py, whose encoder tests/test_conformer_rf.py checks
against RETURNN frontend's `rf.ConformerEncoder`.
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
    argmax,
    batch,
    cast,
    choice,
    concat,
    cos,
    dot,
    dropout,
    end,
    exp,
    expand,
    full,
    glu,
    log_softmax,
    mark_as_loss,
    max_pool,
    merge_dims,
    network,
    one_hot,
    pad_frames,
    range_over,
    reduce_max,
    rel_positions,
    rel_shift,
    relu,
    replace_dim,
    rnnt_loss,
    sigmoid,
    silu,
    sin,
    softmax,
    split,
    split_dims,
    tanh,
    transducer_search,
    where,
    zeros,
)

MODEL_SIZE, HEAD_SIZE = 16, 8  # 512 and 64 in the paper
CONV_KERNEL = 7  # the depthwise convolution's filter (32 in the paper)
LOG_STEP = -2.0 * 9.210340371976184 / MODEL_SIZE  # -2 log(10000) / |model|
DROPOUT = 0.1
BOS = 0  # the begin label in front of the labels
BLANK = 10  # the blank: the last class of vocab + blank
BEAM = 4  # the search's beam (1: greedy)

time = Dim("time")  # input frames
enc_time = Dim("enc_time")  # after the front end's pool: ceil(time / 2)
rel_time = Dim("rel_time")  # relative positions -(n-1) .. n-1 of enc_time: 2n - 1
kv_time1 = Dim("kv_time1")  # each block's keys: its own view of enc_time
kv_time2 = Dim("kv_time2")
label_time = Dim("label_time")
align_time = Dim("align_time")  # a frame-level alignment: one class per encoder frame
pred_time = Dim("pred_time")  # the prediction network's steps: a begin label, then the labels
dec_time = Dim("dec_time")  # the labels a search finds
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
blank = Dim("blank", 1)  # the blank, after the labels
classes = Dim("vocab+blank", 11)  # the dim `vocab + blank` makes
emb = Dim("emb", 8)
pred_dim = Dim("pred", 16)  # the prediction network's LSTM
joint_dim = Dim("joint", 16)


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


class LstmStep(Module):
    """One step of an LSTM, written out (the gate blocks of `Lstm`: cell input, input, forget, output):
    decoding keeps its state where the blank is chosen, which a cell holding its own state cannot."""

    def __init__(self, out_dim):
        self.ff_linear = Linear(4 * out_dim)
        self.rec_linear = Linear(4 * out_dim, with_bias=False)

    def __call__(self, x, state):
        h, c = state
        x_in, g_in, g_forget, g_out = split(self.ff_linear(x) + self.rec_linear(h), 4)
        c = c * sigmoid(g_forget) + tanh(x_in) * sigmoid(g_in)
        h = tanh(c) * sigmoid(g_out)
        return h, (h, c)


class Prediction(Module):
    """The prediction network, one label at a time: an embedding of the label, an LSTM step."""

    def __init__(self):
        self.embedding = Embedding(emb)
        self.lstm = LstmStep(pred_dim)

    def __call__(self, label, state):
        return self.lstm(dropout(self.embedding(label), DROPOUT), state)


class Joint(Module):
    """The joint network: the encoder's and the prediction's projections added, tanh, the scores
    of the labels and the blank (of every encoder frame given, at one prediction step)."""

    def __init__(self):
        self.enc_proj = Linear(joint_dim)
        self.pred_proj = Linear(joint_dim, with_bias=False)
        self.out = Linear(vocab + blank)

    def __call__(self, enc, pred):
        return self.out(tanh(self.enc_proj(enc) + self.pred_proj(pred)))


def encode(frontend, block1, block2, x):
    """The Conformer encoder: the front end, the blocks sharing one positional encoding."""
    h = dropout(frontend(x), DROPOUT)  # [batch, enc_time, model]
    pos_enc = rel_pos_encoding()
    return block2(block1(h, pos_enc), pos_enc)


@network
def conformer_transducer(x: Tensor[batch, time, feat], y: Labels[batch, label_time, vocab]):
    frontend = FrontEnd()
    block1 = ConformerBlock(kv_time1)
    block2 = ConformerBlock(kv_time2)
    encoder = encode(frontend, block1, block2, x)  # [batch, enc_time, model]
    y_in = pad_frames(y, axis=label_time, left=1, value=BOS, out_axis=pred_time)  # BOS, then the labels
    prediction = Prediction()
    joint = Joint()
    h = zeros(batch, pred_dim)
    c = zeros(batch, pred_dim)
    logits = []
    for label in y_in:  # a step of the prediction network, the joint over all encoder frames
        pred, (h, c) = prediction(label, (h, c))
        logits.append(joint(encoder, pred))
    # logits: [batch, pred_time, enc_time, vocab+blank]
    mark_as_loss(rnnt_loss(logits, y, axis=vocab + blank, time_axis=enc_time), "rnnt")
    return {"output": log_softmax(logits, axis=vocab + blank), "encoder": encoder}


def as_vocab(label):
    """A class of vocab + blank as a label of vocab (the blank becomes label 0)."""
    labels_part, _blank_part = split(one_hot(label), [vocab, blank])
    return argmax(labels_part, axis=vocab)


@network
def conformer_transducer_search(x: Tensor[batch, time, feat], align: Labels[batch, align_time, classes]):
    """Decoding from the training network's modules and parameters, one label per encoder frame
    (RNA-style, as RETURNN's transducer setups decode): a `choice` over vocab + blank per frame,
    the prediction network advanced only on a label. Searched with a beam of BEAM (1: greedy);
    not searching (teacher forcing), it scores `align`, a frame-level alignment, which the loop's
    bound (the input's frames) must cover: `netc verify` it with `--search`."""
    frontend = FrontEnd()
    block1 = ConformerBlock(kv_time1)
    block2 = ConformerBlock(kv_time2)
    encoder = encode(frontend, block1, block2, x)  # [batch, enc_time, model]
    positions = range_over(enc_time, dtype="float32")  # [batch, enc_time]
    frames = reduce_max(positions, axis=enc_time) + 1.0
    prediction = Prediction()
    joint = Joint()
    h = zeros(batch, pred_dim)  # the prediction network's state before the last label
    c = zeros(batch, pred_dim)
    last = full(batch, value=BOS, class_dim=vocab)  # the last label: BOS before the first
    pos = zeros(batch)
    logits, labels = [], []
    for _ in range(x.max_seq_len):
        enc_t = dot(cast(positions == pos, "float32"), encoder, reduce=enc_time)  # this frame of the encoder
        pred, (h_next, c_next) = prediction(last, (h, c))
        scores = joint(enc_t, pred)  # `choice` takes their log_softmax
        logits.append(scores)
        label = choice(scores, target=align, beam=BEAM)
        labels.append(label)
        emit = label != BLANK  # a label: the prediction network takes it, the blank: it stays
        h = where(emit, h_next, h)
        c = where(emit, c_next, c)
        last = where(emit, as_vocab(label), last)
        pos = pos + 1.0
        if end(pos >= frames):
            break
    return {"output": labels, "frame_scores": logits}


def symbol(prediction, joint, enc_t, last, h, c, more):
    """One more symbol at this frame while `more` is 1.0 (no blank yet): the joint network's best
    class after the last label; a label advances the prediction network. The scores, the symbol
    (the blank once the frame is done), the last label, the prediction's state (h, c), `more`."""
    pred, (h_next, c_next) = prediction(last, (h, c))
    scores = joint(enc_t, pred)
    best = argmax(scores, axis=vocab + blank)
    more = where(best != BLANK, more, 0.0)  # 1.0 while the frame emits labels
    emit = more > 0.5
    last = where(emit, as_vocab(best), last)
    return scores, where(emit, best, BLANK), last, where(emit, h_next, h), where(emit, c_next, c), more


@network
def conformer_transducer_greedy(x: Tensor[batch, time, feat]):
    """Greedy decoding from the training network's modules and parameters, time-synchronous: at
    each encoder frame up to 3 symbols, each the joint network's best class, until the blank (the
    symbols of a frame are three steps written out). `sym<k>` is each frame's k-th symbol, the blank
    after its last label; `frame_scores` the scores of each frame's first (its list comes first,
    so the loop has the training loop's name, and the parameters their names in RETURNN)."""
    frontend = FrontEnd()
    block1 = ConformerBlock(kv_time1)
    block2 = ConformerBlock(kv_time2)
    encoder = encode(frontend, block1, block2, x)  # [batch, enc_time, model]
    prediction = Prediction()
    joint = Joint()
    h = zeros(batch, pred_dim)  # the prediction network's state before the last label
    c = zeros(batch, pred_dim)
    last = full(batch, value=BOS, class_dim=vocab)
    logits, sym0, sym1, sym2 = [], [], [], []
    for enc_t in encoder:
        more = full(batch, value=1.0)  # no blank at this frame yet
        scores, label, last, h, c, more = symbol(prediction, joint, enc_t, last, h, c, more)
        logits.append(scores)
        sym0.append(label)
        _, label, last, h, c, more = symbol(prediction, joint, enc_t, last, h, c, more)
        sym1.append(label)
        _, label, last, h, c, more = symbol(prediction, joint, enc_t, last, h, c, more)
        sym2.append(label)
    return {"sym0": sym0, "sym1": sym1, "sym2": sym2, "frame_scores": logits}


def search(encoder, prediction, joint, method: str, max_sym_per_frame: int):
    """The best labels (and their score) `transducer_search` finds over the encoder's frames with
    the prediction network (from BOS and a zero state) and the joint network as they are."""
    return transducer_search(
        encoder,
        axis=enc_time,
        predict=prediction,  # (label, (h, c)) -> (pred, (h, c))
        joint=joint,  # (encoder frame, pred) -> scores of vocab + blank
        state=(zeros(batch, pred_dim), zeros(batch, pred_dim)),
        label_dim=vocab,
        start=BOS,
        blank=BLANK,
        beam=BEAM,
        method=method,
        max_sym_per_frame=max_sym_per_frame,
        out_axis=dec_time,
    )


@network
def conformer_transducer_modified(x: Tensor[batch, time, feat]):
    """icefall's modified beam search: at each encoder frame, each hypothesis one symbol (a label
    or the blank); the best BEAM of them go on, those with the same labels merged."""
    frontend = FrontEnd()
    block1 = ConformerBlock(kv_time1)
    block2 = ConformerBlock(kv_time2)
    encoder = encode(frontend, block1, block2, x)  # [batch, enc_time, model]
    prediction = Prediction()
    joint = Joint()
    labels, scores = search(encoder, prediction, joint, "modified", 1)
    return {"output": labels, "scores": scores}


@network
def conformer_transducer_time_sync(x: Tensor[batch, time, feat]):
    """Time-synchronous beam search: at each encoder frame, hypotheses grow by up to 3 labels
    before the blank ends the frame; the best BEAM go on."""
    frontend = FrontEnd()
    block1 = ConformerBlock(kv_time1)
    block2 = ConformerBlock(kv_time2)
    encoder = encode(frontend, block1, block2, x)  # [batch, enc_time, model]
    prediction = Prediction()
    joint = Joint()
    labels, scores = search(encoder, prediction, joint, "time_sync", 3)
    return {"output": labels, "scores": scores}


@network
def conformer_transducer_graves(x: Tensor[batch, time, feat]):
    """torchaudio's RNNTBeamSearch (ESPnet's default beam search): at each encoder frame, the
    hypotheses grow by up to 3 labels while a growth outscores the BEAM-th best that ended the
    frame; the best BEAM of those that ended go on."""
    frontend = FrontEnd()
    block1 = ConformerBlock(kv_time1)
    block2 = ConformerBlock(kv_time2)
    encoder = encode(frontend, block1, block2, x)  # [batch, enc_time, model]
    prediction = Prediction()
    joint = Joint()
    labels, scores = search(encoder, prediction, joint, "graves", 3)
    return {"output": labels, "scores": scores}

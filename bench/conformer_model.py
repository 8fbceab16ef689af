"""The Conformer encoder of bench_conformer.py: what RETURNN frontend's `rf.ConformerEncoder`
computes with `input_layer=None` (its input projection, a `Linear` without bias, straight from
the features), no dropout, the default `RelPosSelfAttention` (sinusoidal relative positions, a
linear position projection, position biases u and v) and a masked batch norm; then a `Linear`
to the labels plus the blank and a CTC loss (rf's `ctc_loss` on the same logits).

examples/conformer_ctc.py's blocks at a training size: model dim 256, 4 heads of 64, feed-forward
1024, depthwise convolution of 31 frames, 4 blocks. The sizes are the constants below
(bench_conformer.py rewrites them for a small check); the blocks are written out.
"""

from netc import (
    BatchNorm,
    Bias,
    Conv1d,
    Dim,
    Labels,
    LayerNorm,
    Linear,
    Module,
    Tensor,
    batch,
    concat,
    cos,
    ctc_loss,
    dot,
    exp,
    expand,
    glu,
    mark_as_loss,
    merge_dims,
    network,
    range_over,
    rel_positions,
    rel_shift,
    replace_dim,
    silu,
    sin,
    softmax,
    split_dims,
)

FEAT, MODEL_SIZE, HALF_SIZE, HEADS, HEAD_SIZE, FF_SIZE, CONV_KERNEL, VOCAB = 80, 256, 128, 4, 64, 1024, 31, 100
LOG_STEP = -2.0 * 9.210340371976184 / MODEL_SIZE  # -2 log(10000) / |model|

time = Dim("time")  # input frames (no subsampling)
rel_time = Dim("rel_time")  # relative positions -(n-1) .. n-1: 2n - 1
kv_time1 = Dim("kv_time1")  # each block's keys: its own view of time
kv_time2 = Dim("kv_time2")
kv_time3 = Dim("kv_time3")
kv_time4 = Dim("kv_time4")
label_time = Dim("label_time")
feat = Dim("feat", FEAT)
model = Dim("model", MODEL_SIZE)
ff = Dim("ff", FF_SIZE)
pos_half = Dim("pos_half", HALF_SIZE)  # sin and cos halves of the positional encoding
heads = Dim("heads", HEADS)
head_feat = Dim("head_feat", HEAD_SIZE)
vocab = Dim("vocab", VOCAB)
blank = Dim("blank", 1)  # CTC's blank, after the labels


def rel_pos_encoding():
    """Sinusoidal encodings of the relative positions, [batch, rel_time, model]."""
    rel = rel_positions(axis=time, out_axis=rel_time, dtype="float32")
    angles = expand(rel, pos_half) * exp(range_over(pos_half, dtype="float32") * LOG_STEP)
    return concat(sin(angles), cos(angles))


def heads_of(v):
    return split_dims(v, axis=model, dims=(heads, head_feat))


class FeedForward(Module):
    def __init__(self):
        self.linear_ff = Linear(ff)
        self.linear_out = Linear(model)

    def __call__(self, x):
        return self.linear_out(silu(self.linear_ff(x)))


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
        x_kv = replace_dim(x, axis=time, out_axis=self.kv_axis)
        q = heads_of(self.query(x))  # [batch, time, heads, head_feat]
        k = heads_of(self.key(x_kv))  # [batch, kv_time, heads, head_feat]
        v = heads_of(self.value(x_kv))
        pos = heads_of(self.linear_pos(pos_enc))  # [batch, rel_time, heads, head_feat]
        content = dot(self.pos_bias_u(q), k, reduce=head_feat)  # [batch, time, kv_time, heads]
        position = dot(self.pos_bias_v(q), pos, reduce=head_feat)  # [batch, time, rel_time, heads]
        position = rel_shift(position, axis=rel_time, query_axis=time, kv_axis=self.kv_axis)
        w = softmax((content + position) * HEAD_SIZE**-0.5, axis=self.kv_axis)
        return self.proj(merge_dims(dot(w, v, reduce=self.kv_axis), dims=(heads, head_feat), out_dim=model))


class ConvModule(Module):
    def __init__(self):
        self.positionwise_conv1 = Linear(2 * model)
        self.depthwise_conv = Conv1d(model, CONV_KERNEL, groups=MODEL_SIZE)  # depthwise
        self.norm = BatchNorm()
        self.positionwise_conv2 = Linear(model)

    def __call__(self, x):
        h = glu(self.positionwise_conv1(x), model)
        h = self.norm(self.depthwise_conv(h, axis=time))
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
        x = 0.5 * self.ffn1(self.ffn1_layer_norm(x)) + x
        x = self.self_att(self.self_att_layer_norm(x), pos_enc) + x
        x = self.conv_block(self.conv_layer_norm(x)) + x
        x = 0.5 * self.ffn2(self.ffn2_layer_norm(x)) + x
        return self.final_layer_norm(x)


@network
def conformer_encoder(x: Tensor[batch, time, feat], y: Labels[batch, label_time, vocab]):
    input_projection = Linear(model, with_bias=False)
    layer1 = ConformerBlock(kv_time1)
    layer2 = ConformerBlock(kv_time2)
    layer3 = ConformerBlock(kv_time3)
    layer4 = ConformerBlock(kv_time4)
    pos_enc = rel_pos_encoding()  # shared by the blocks, as rf caches it
    h = input_projection(x)
    encoder = layer4(layer3(layer2(layer1(h, pos_enc), pos_enc), pos_enc), pos_enc)
    logits = Linear(vocab + blank)(encoder)
    mark_as_loss(ctc_loss(logits, y, axis=vocab + blank), "ctc")
    return {"encoder": encoder}

"""A streaming Conformer encoder trained with CTC, in whole-sequence chunk-masked form.

Streaming encoders (icefall's streaming Conformer, ESPnet's blockwise attention) run chunk by
chunk when deployed: each chunk of `CHUNK_SIZE` encoder frames attends over itself and a cache
of the keys and values of the `LEFT_CHUNKS` chunks before it, and the convolution module's
depthwise convolution is causal, reading a cache of its last (kernel - 1) input frames. They
train on whole sequences with the equivalent mask, in parallel, as this network does:
- front end: a `Linear` of each frame, a max pool over pairs of frames (2x fewer frames: windows
  of their own, so input chunks of 2 * CHUNK_SIZE frames give whole encoder chunks);
- blocks, each: a feed-forward half step, self-attention with relative positional encoding and
  position biases limited by `chunk_mask` (the keys of the query's own chunk and the
  `LEFT_CHUNKS` chunks before it; the others' energies set to -1e30, so they get exactly no
  weight), the convolution module with a causal depthwise `Conv1d` (`padding="causal"`) and a
  `LayerNorm` (not `BatchNorm`: the statistics of a chunk are not the whole batch's), a second
  feed-forward half step, a final `LayerNorm`; every part pre-normed, with a residual;
- a `Linear` to the labels plus the blank, and a CTC loss.

No output frame reads a frame of a later chunk, so the chunk-by-chunk run gives the same numbers:
tests/test_chunk_attention.py runs this encoder chunk by chunk in plain torch (caches of the last
LEFT_CHUNKS * CHUNK_SIZE keys and values and the convolution's last frames) and compares.
"""

from netc import (
    Bias,
    Conv1d,
    Dim,
    Labels,
    LayerNorm,
    Linear,
    Module,
    Tensor,
    batch,
    chunk_mask,
    concat,
    cos,
    ctc_loss,
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
    rel_positions,
    rel_shift,
    replace_dim,
    silu,
    sin,
    softmax,
    split_dims,
    where,
)

MODEL_SIZE, HEAD_SIZE = 16, 8
CONV_KERNEL = 5  # the causal depthwise convolution's filter
CHUNK_SIZE = 4  # encoder frames per chunk
LEFT_CHUNKS = 2  # chunks of left context each chunk attends to besides itself
LOG_STEP = -2.0 * 9.210340371976184 / MODEL_SIZE  # -2 log(10000) / |model|
DROPOUT = 0.1
MASKED = -1e30  # the energy of a key outside the context: exp underflows to exactly 0

time = Dim("time")  # input frames
enc_time = Dim("enc_time")  # after the front end's pool: ceil(time / 2)
rel_time = Dim("rel_time")  # relative positions -(n-1) .. n-1 of enc_time: 2n - 1
kv_time1 = Dim("kv_time1")  # each block's keys: its own view of enc_time
kv_time2 = Dim("kv_time2")
label_time = Dim("label_time")
feat = Dim("feat", 16)
model = Dim("model", MODEL_SIZE)
pos_half = Dim("pos_half", 8)  # sin and cos halves of the positional encoding
heads = Dim("heads", 2)
head_feat = Dim("head_feat", HEAD_SIZE)
vocab = Dim("vocab", 10)
blank = Dim("blank", 1)  # CTC's blank, after the labels


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


class ChunkedRelPosSelfAttention(Module):
    """Relative-position self-attention over the query's chunk and `LEFT_CHUNKS` chunks before it."""

    def __init__(self, kv_axis):
        self.kv_axis = kv_axis
        self.query = Linear(model)
        self.key = Linear(model)
        self.value = Linear(model)
        self.linear_pos = Linear(model, with_bias=False)
        self.pos_bias_u = Bias((heads, head_feat))
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
        context = chunk_mask(query_axis=enc_time, kv_axis=self.kv_axis, chunk_size=CHUNK_SIZE, left_chunks=LEFT_CHUNKS)
        energies = where(context, (content + position) * HEAD_SIZE**-0.5, MASKED)
        w = dropout(softmax(energies, axis=self.kv_axis), DROPOUT)
        return self.proj(merge_dims(dot(w, v, reduce=self.kv_axis), dims=(heads, head_feat), out_dim=model))


class CausalConvModule(Module):
    def __init__(self):
        self.positionwise_conv1 = Linear(2 * model)
        self.depthwise_conv = Conv1d(model, CONV_KERNEL, padding="causal", groups=MODEL_SIZE)
        self.norm = LayerNorm()
        self.positionwise_conv2 = Linear(model)

    def __call__(self, x):
        h = glu(self.positionwise_conv1(x), model)
        h = self.norm(self.depthwise_conv(h, axis=enc_time))
        return self.positionwise_conv2(silu(h))


class StreamingConformerBlock(Module):
    def __init__(self, kv_axis):
        self.ffn1 = FeedForward()
        self.ffn1_layer_norm = LayerNorm()
        self.self_att = ChunkedRelPosSelfAttention(kv_axis)
        self.self_att_layer_norm = LayerNorm()
        self.conv_block = CausalConvModule()
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


@network
def conformer_streaming(x: Tensor[batch, time, feat], y: Labels[batch, label_time, vocab]):
    frontend = Linear(model)
    block1 = StreamingConformerBlock(kv_time1)
    block2 = StreamingConformerBlock(kv_time2)
    h = max_pool(frontend(x), axis=time, size=2, out_axis=enc_time)  # [batch, enc_time, model]
    pos_enc = rel_pos_encoding()
    encoder = block2(block1(dropout(h, DROPOUT), pos_enc), pos_enc)
    logits = Linear(vocab + blank)(encoder)
    mark_as_loss(ctc_loss(logits, y, axis=vocab + blank), "ctc")
    return {"output": log_softmax(logits, axis=vocab + blank), "encoder": encoder}

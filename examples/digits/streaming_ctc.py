"""A streaming Conformer CTC model for the spoken-digit recipe (run.py --model streaming).

The network of examples/conformer_streaming.py at the recipe's sizes: 40 log-mel features per
10 ms frame; a `Linear` and a max pool over windows of 4 frames of their own (40 ms per encoder
frame, so input chunks of 4 * CHUNK_SIZE frames give whole encoder chunks); two Conformer blocks
whose self-attention (relative positions) is limited by `chunk_mask` to the query's own chunk of
`CHUNK_SIZE` encoder frames and the `LEFT_CHUNKS` chunks before it, and whose convolution module's
depthwise `Conv1d` is causal with a `LayerNorm`; a `Linear` to the ten digits plus CTC's blank.

No output frame reads an input frame after the end of its own chunk: once a chunk of audio is in,
its frames' outputs are final (run.py's streamed decode relies on this and checks it).

`streaming_ctc` is the training network (its `ctc` loss summed over the batch);
`streaming_ctc_decode` has the same modules, so the same parameters, and decodes: `greedy` the best
path's labels, `labels` the best prefix of a CTC prefix beam search (`BEAM` prefixes);
`streaming_ctc_encode` (same modules) gives only the log-probabilities per encoder frame, what
run.py's streamed decode runs on each prefix of the audio.
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
    chunks,
    concat,
    cos,
    ctc_greedy,
    ctc_loss,
    ctc_prefix_search,
    dot,
    dropout,
    exp,
    expand,
    full,
    glu,
    join_chunk,
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
    slice_static,
    softmax,
    split_dims,
    to_chunk,
    where,
    zeros,
)

MODEL_SIZE, HEAD_SIZE = 64, 16
POOL = 4  # input frames per encoder frame
CONV_KERNEL = 7  # the causal depthwise convolution's filter
CHUNK_SIZE = 4  # encoder frames per chunk: 160 ms of audio
LEFT_CHUNKS = 4  # chunks of left context each chunk attends to besides itself
WINDOW = (LEFT_CHUNKS + 1) * CHUNK_SIZE  # a chunk's keys: the cached and its own
LOG_STEP = -2.0 * 9.210340371976184 / MODEL_SIZE  # -2 log(10000) / |model|
DROPOUT = 0.1
MASKED = -1e30  # the energy of a key outside the context: exp underflows to exactly 0
BEAM = 4  # prefixes the prefix beam search keeps

time = Dim("time")  # 10 ms frames
enc_time = Dim("enc_time")  # after the front end's pool: ceil(time / POOL)
rel_time = Dim("rel_time")  # relative positions -(n-1) .. n-1 of enc_time: 2n - 1
kv_time1 = Dim("kv_time1")  # each block's keys: its own view of enc_time
kv_time2 = Dim("kv_time2")
label_time = Dim("label_time")  # the reference digits
greedy_time = Dim("greedy_time")  # the decoded digits: greedy
search_time = Dim("search_time")  # and by prefix beam search
feat = Dim("feat", 40)  # log-mel bands
model = Dim("model", MODEL_SIZE)
pos_half = Dim("pos_half", 32)  # sin and cos halves of the positional encoding
heads = Dim("heads", 4)
head_feat = Dim("head_feat", HEAD_SIZE)
vocab = Dim("vocab", 10)  # the digits 0-9
blank = Dim("blank", 1)  # CTC's blank, after the digits
# the chunk-by-chunk network's
chunk = Dim("chunk", CHUNK_SIZE)  # a step's encoder frames
cache_time = Dim("cache_time", LEFT_CHUNKS * CHUNK_SIZE)  # the keys and values cached
window = Dim("window", WINDOW)  # the cache and the chunk: a query's keys
conv_ctx = Dim("conv_ctx", CONV_KERNEL - 1)  # the causal convolution's cached input frames
conv_window = Dim("conv_window", CONV_KERNEL - 1 + CHUNK_SIZE)  # those and the chunk's
conv_frames = Dim("conv_frames", CHUNK_SIZE)  # the convolution's results over conv_window


def sinusoids(rel):
    """Sinusoidal encodings of relative positions (a key's minus a query's), over `model`."""
    angles = expand(rel, pos_half) * exp(range_over(pos_half, dtype="float32") * LOG_STEP)
    return concat(sin(angles), cos(angles))


def rel_pos_encoding():
    """The relative positions of the whole sequence, [batch, rel_time, model]."""
    return sinusoids(rel_positions(axis=enc_time, out_axis=rel_time, dtype="float32"))


def heads_of(v):
    return split_dims(v, axis=model, dims=(heads, head_feat))


def last_of_window(x, cache_axis):
    """The next chunk's cache: the last frames of the window (x over `window`)."""
    return slice_static(x, axis=window, start=CHUNK_SIZE, out_axis=cache_axis)


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
        """Over the whole sequence, limited by `chunk_mask`."""
        x_kv = replace_dim(x, axis=enc_time, out_axis=self.kv_axis)
        q = heads_of(self.query(x))  # [batch, enc_time, heads, head_feat]
        k = heads_of(self.key(x_kv))  # [batch, kv_time, heads, head_feat]
        v = heads_of(self.value(x_kv))
        pos = heads_of(self.linear_pos(pos_enc))  # [batch, rel_time, heads, head_feat]
        position = dot(self.pos_bias_v(q), pos, reduce=head_feat)  # [batch, enc_time, rel_time, heads]
        position = rel_shift(position, axis=rel_time, query_axis=enc_time, kv_axis=self.kv_axis)
        context = chunk_mask(query_axis=enc_time, kv_axis=self.kv_axis, chunk_size=CHUNK_SIZE, left_chunks=LEFT_CHUNKS)
        return self.attend(q, k, v, position, context, self.kv_axis)

    def step(self, x, valid, k_cache, v_cache):
        """One chunk x [batch, chunk, model] over the window of the cached keys and values and its
        own (`valid`: the window's valid frames); the caches for the next chunk."""
        k = join_chunk(k_cache, self.key(x), cache_axis=cache_time, axis=chunk, out_axis=window)
        v = join_chunk(v_cache, self.value(x), cache_axis=cache_time, axis=chunk, out_axis=window)
        q = heads_of(self.query(x))  # [batch, chunk, heads, head_feat]
        out = self.attend(q, heads_of(k), heads_of(v), self.window_position(q), valid, window)
        return out, last_of_window(k, cache_time), last_of_window(v, cache_time)

    def window_position(self, q):
        """The position scores of the chunk's queries against the window's keys, [batch, chunk,
        window, heads]: key j of the window is LEFT_CHUNKS * CHUNK_SIZE frames before the chunk's
        first, so its position relative to query i is j - LEFT_CHUNKS * CHUNK_SIZE - i."""
        q_v = self.pos_bias_v(q)
        position = zeros(batch, chunk, window, heads)
        for j in range(WINDOW):
            rel = (j - LEFT_CHUNKS * CHUNK_SIZE) - range_over(chunk, dtype="float32")  # [batch, chunk]
            score = dot(q_v, heads_of(self.linear_pos(sinusoids(rel))), reduce=head_feat)  # [batch, chunk, heads]
            position = position + where(range_over(window) == j, expand(score, window), 0.0)
        return position

    def attend(self, q, k, v, position, context, kv_axis):
        """The energies of content and position, the keys outside `context` excluded."""
        content = dot(self.pos_bias_u(q), k, reduce=head_feat)  # [batch, queries, kv_axis, heads]
        energies = where(context, (content + position) * HEAD_SIZE**-0.5, MASKED)
        w = dropout(softmax(energies, axis=kv_axis), DROPOUT)
        return self.proj(merge_dims(dot(w, v, reduce=kv_axis), dims=(heads, head_feat), out_dim=model))


class CausalConvModule(Module):
    def __init__(self):
        self.positionwise_conv1 = Linear(2 * model)
        self.depthwise_conv = Conv1d(model, CONV_KERNEL, padding="causal", groups=MODEL_SIZE)
        self.norm = LayerNorm()
        self.positionwise_conv2 = Linear(model)

    def __call__(self, x):
        return self.finish(self.depthwise_conv(glu(self.positionwise_conv1(x), model), axis=enc_time))

    def step(self, x, cache):
        """One chunk x [batch, chunk, model], its convolution reading the cached last input frames;
        the cache for the next chunk."""
        joined = join_chunk(
            cache, glu(self.positionwise_conv1(x), model), cache_axis=conv_ctx, axis=chunk, out_axis=conv_window
        )
        h = to_chunk(self.depthwise_conv(joined, axis=conv_window, out_axis=conv_frames), axis=conv_frames, like=x)
        return self.finish(h), slice_static(joined, axis=conv_window, start=CHUNK_SIZE, out_axis=conv_ctx)

    def finish(self, h):
        return self.positionwise_conv2(silu(self.norm(h)))


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
        return self.finish(x)

    def step(self, x, valid, k_cache, v_cache, conv_cache):
        """One chunk, with the block's caches (keys, values, the convolution's input frames)."""
        x = 0.5 * dropout(self.ffn1(self.ffn1_layer_norm(x)), DROPOUT) + x
        att, k_cache, v_cache = self.self_att.step(self.self_att_layer_norm(x), valid, k_cache, v_cache)
        x = dropout(att, DROPOUT) + x
        conv, conv_cache = self.conv_block.step(self.conv_layer_norm(x), conv_cache)
        x = dropout(conv, DROPOUT) + x
        return self.finish(x), k_cache, v_cache, conv_cache

    def finish(self, x):
        x = 0.5 * dropout(self.ffn2(self.ffn2_layer_norm(x)), DROPOUT) + x
        return self.final_layer_norm(x)


def empty_caches():
    """A block's caches before the first chunk: no frame yet."""
    return zeros(batch, cache_time, model), zeros(batch, cache_time, model), zeros(batch, conv_ctx, model)


class Encoder(Module):
    def __init__(self):
        self.frontend = Linear(model)
        self.block1 = StreamingConformerBlock(kv_time1)
        self.block2 = StreamingConformerBlock(kv_time2)
        self.logits = Linear(vocab + blank)

    def __call__(self, x):
        h = max_pool(self.frontend(x), axis=time, size=POOL, out_axis=enc_time)  # [batch, enc_time, model]
        pos_enc = rel_pos_encoding()
        h = self.block2(self.block1(dropout(h, DROPOUT), pos_enc), pos_enc)
        return self.logits(h)  # [batch, enc_time, vocab + blank]

    def chunked(self, x):
        """The same, chunk by chunk: CHUNK_SIZE encoder frames a step, the caches as state. The front
        end runs over the whole input (its pool windows never cross a chunk)."""
        h = max_pool(self.frontend(x), axis=time, size=POOL, out_axis=enc_time)
        k1, v1, conv1 = empty_caches()
        k2, v2, conv2 = empty_caches()
        valid = full(batch, cache_time, value=False, dtype="bool")  # the cached frames that are frames
        frames = []
        for c in chunks(dropout(h, DROPOUT), chunk):  # c: [batch, chunk, model]
            ok = full(batch, chunk, value=True, dtype="bool")
            window_valid = join_chunk(valid, ok, cache_axis=cache_time, axis=chunk, out_axis=window)
            e, k1, v1, conv1 = self.block1.step(c, window_valid, k1, v1, conv1)
            e, k2, v2, conv2 = self.block2.step(e, window_valid, k2, v2, conv2)
            valid = last_of_window(window_valid, cache_time)
            frames.append(e)
        return self.logits(frames)  # [batch, enc_time, vocab + blank]


@network
def streaming_ctc(x: Tensor[batch, time, feat], y: Labels[batch, label_time, vocab]):
    encoder = Encoder()
    logits = encoder(x)
    mark_as_loss(ctc_loss(logits, y, axis=vocab + blank), "ctc")
    return {"output": log_softmax(logits, axis=vocab + blank)}


@network
def streaming_ctc_decode(x: Tensor[batch, time, feat]):
    encoder = Encoder()
    logits = encoder(x)
    greedy = ctc_greedy(logits, axis=vocab + blank, out_axis=greedy_time)
    labels, score = ctc_prefix_search(logits, axis=vocab + blank, beam=BEAM, out_axis=search_time)
    return {"greedy": greedy, "labels": labels, "score": score}


@network
def streaming_ctc_encode(x: Tensor[batch, time, feat]):
    encoder = Encoder()
    return {"output": log_softmax(encoder(x), axis=vocab + blank)}


@network
def streaming_ctc_chunked(x: Tensor[batch, time, feat]):
    encoder = Encoder()
    return {"output": log_softmax(encoder.chunked(x), axis=vocab + blank)}

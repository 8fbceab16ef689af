"""examples/conformer_aed.py's Transformer decoder alone, on a given encoder output: its code (the
constants, `heads_of`, `abs_pos_encoding`, `DecoderLayer` and the loop) is the example's, which
tests/test_transformer_rf.py checks, and compares with RETURNN frontend's `TransformerDecoder`."""

from netc import (
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
    mark_as_loss,
    merge_dims,
    network,
    range_over,
    relu,
    sin,
    softmax,
    split,
    split_dims,
    zeros,
)

MODEL_SIZE, HEAD_SIZE = 16, 8  # 512 and 64 in the paper
LOG_STEP = -2.0 * 9.210340371976184 / MODEL_SIZE  # -2 log(10000) / |model|
DEC_LOG_STEP = -9.210340371976184 / (MODEL_SIZE / 2 - 1)  # rf's: the last frequency is 1 / 10000
DROPOUT = 0.1
EOS = 0

enc_time = Dim("enc_time")  # the encoder's frames
dec_time = Dim("dec_time")  # labels, EOS last
hist1 = Dim("hist1")  # each decoder layer's keys and values of the steps so far
hist2 = Dim("hist2")
model = Dim("model", MODEL_SIZE)
pos_half = Dim("pos_half", 8)  # sin and cos halves of the positional encodings
sin_cos = Dim("sin_cos", 2)
heads = Dim("heads", 2)
head_feat = Dim("head_feat", HEAD_SIZE)
vocab = Dim("vocab", 10)  # EOS = 0, also the begin label


def heads_of(v):
    return split_dims(v, axis=model, dims=(heads, head_feat))


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
def transformer_decoder(encoder: Tensor[batch, enc_time, model], y: Labels[batch, dec_time, vocab]):
    layer1 = DecoderLayer(hist1)
    layer2 = DecoderLayer(hist2)
    input_embedding = Embedding(model)
    output_logits = Linear(vocab, with_bias=False, weight=input_embedding.weight)  # the embedding's, transposed
    keys1, values1 = empty(batch, hist1, heads, head_feat), empty(batch, hist1, heads, head_feat)
    keys2, values2 = empty(batch, hist2, heads, head_feat), empty(batch, hist2, heads, head_feat)
    label = full(batch, value=EOS, class_dim=vocab)  # the begin label
    pos = zeros(batch)
    logits, labels = [], []
    for _ in range(2 * encoder.max_seq_len):  # training: y's frames; searching: until EOS, at most this
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
    return {"logits": logits, "labels": labels}

"""Hard attention trained on a position target computed in the network, as RETURNN's latent
monotonic attention configs compute theirs (`t_linear`): decoder step i of a sequence with N
labels and T encoder frames is trained on frame round((i + 1) * max(T - 1, 0) / max(N, 1)), at most
T - 1. The lengths come from the inputs themselves (`y`'s through its labels, so a search, which
has no `y`, computes none of it); a search chooses the positions itself. `furthest`, the furthest
position so far, is an int state that depends on the step's first choice only (RETURNN carries it
with the last choice's hypotheses: zeros of its own dtype added)."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    cast,
    choice,
    cross_entropy,
    dot,
    end,
    full,
    mark_as_loss,
    maximum,
    minimum,
    network,
    one_hot,
    range_over,
    reduce_sum,
    round,
    tanh,
    zeros,
)

enc_time = Dim("enc_time")
dec_time = Dim("dec_time")
feat = Dim("feat", 6)
vocab = Dim("vocab", 7)
model = Dim("model", 5)


@network
def hard_attention_linear(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc_len = reduce_sum(range_over(enc_time, dtype="float32") * 0.0 + 1.0, axis=enc_time)  # [batch]
    dec_len = reduce_sum(cast(y >= 0, "float32"), axis=dec_time)  # [batch], from the labels
    steps = range_over(dec_time, dtype="float32") + 1.0 + cast(y, "float32") * 0.0  # [batch, dec_time]
    pos = round(steps * (maximum(enc_len - 1.0, 0.0) / maximum(dec_len, 1.0)))
    align = cast(minimum(pos, enc_len - 1.0), "int32", class_dim=enc_time)  # positions over enc_time
    enc = tanh(Linear(model)(x))
    s = zeros(batch, model)
    furthest = full(batch, value=-1, dtype="int32")
    labels, positions, logits, furthests = [], [], [], []
    for _ in range(x.max_seq_len + 2):
        energy = dot(tanh(Linear(model)(s) + enc), Linear(model)(s), reduce=model)  # [batch, enc_time]
        where = choice(energy, target=align, beam=4, input_type="log_prob", length_normalization=False)
        frame = dot(one_hot(where), enc, reduce=enc_time)
        furthest = maximum(where, furthest)
        s = tanh(Linear(model)(frame) + Linear(model, with_bias=False)(s))
        scores = Linear(vocab)(s)
        logits.append(scores)
        label = choice(scores, target=y, beam=4)
        s = s + Embedding(model)(label)
        labels.append(label)
        positions.append(where)
        furthests.append(furthest)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels, "positions": positions, "logits": logits, "furthest": furthests}

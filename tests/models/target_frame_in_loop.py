"""A decoder step reading its target's frame (`align[i]`, training only) as RETURNN's latent
attention configs read `data:t_target` in their unit: the attention window starts at the
previous position, or at the step's target position where that is before it (a target that
goes back). A search has no target: its window starts at the previous position. `t = where`
keeps the chosen position as a plain int state (its initial value -1 is no position)."""

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
    mask_inf,
    maximum,
    minimum,
    network,
    one_hot,
    range_over,
    reduce_sum,
    round,
    searching,
    tanh,
    zeros,
)

enc_time = Dim("enc_time")
dec_time = Dim("dec_time")
feat = Dim("feat", 6)
vocab = Dim("vocab", 7)
model = Dim("model", 5)


@network
def target_frame_in_loop(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc_len = reduce_sum(range_over(enc_time, dtype="float32") * 0.0 + 1.0, axis=enc_time)
    dec_len = reduce_sum(cast(y >= 0, "float32"), axis=dec_time)
    steps = range_over(dec_time, dtype="float32") + 1.0 + cast(y, "float32") * 0.0
    pos = round(steps * (maximum(enc_len - 1.0, 0.0) / maximum(dec_len, 1.0)))
    align = cast(minimum(pos, enc_len - 1.0), "int32", class_dim=enc_time)
    enc = tanh(Linear(model)(x))
    frames = range_over(enc_time)  # [enc_time]: each frame's index
    s = zeros(batch, model)
    t = full(batch, value=-1, dtype="int32")
    labels, positions, logits, starts = [], [], [], []
    for i in range(x.max_seq_len + 2):
        if searching():
            start = t
        else:
            start = minimum(t, align[i])  # the step's target position, where it is before the last
        energy = dot(tanh(Linear(model)(s) + enc), Linear(model)(s), reduce=model)  # [batch, enc_time]
        energy = mask_inf(energy, frames < start)  # the window: frames from `start` on
        where = choice(energy, target=align, beam=4, input_type="logits", length_normalization=False)
        t = where
        frame = dot(one_hot(where), enc, reduce=enc_time)
        s = tanh(Linear(model)(frame) + Linear(model, with_bias=False)(s))
        scores = Linear(vocab)(s)
        logits.append(scores)
        label = choice(scores, target=y, beam=4)
        s = s + Embedding(model)(label)
        labels.append(label)
        positions.append(where)
        starts.append(start)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels, "positions": positions, "logits": logits, "starts": starts}

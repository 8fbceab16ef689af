"""Hard attention (RETURNN's latent monotonic attention): each decoder step first chooses an
encoder POSITION, a `choice` over the encoder's frames (a dynamic dim: a sequence's padded
frames are never chosen), trained on `align` (a position per decoder step), reads that frame
(`one_hot` of the position, a `dot` over the frames), then chooses the label (trained on `y`).
The beam (5) is above the shortest sequence's frames (4): its other hypotheses score -inf. As the
corpus' configs, the position's choice has no length normalization, the label's has (each choice
rescales ended hypotheses as its own flag says; the last one's normalises the final score)."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    cross_entropy,
    dot,
    end,
    mark_as_loss,
    network,
    one_hot,
    tanh,
    zeros,
)

enc_time = Dim("enc_time")
dec_time = Dim("dec_time")
feat = Dim("feat", 6)
vocab = Dim("vocab", 7)
model = Dim("model", 5)


@network
def hard_attention(
    x: Tensor[batch, enc_time, feat], align: Labels[batch, dec_time, enc_time], y: Labels[batch, dec_time, vocab]
):
    enc = tanh(Linear(model)(x))
    s = zeros(batch, model)
    labels, positions, logits, att_energies = [], [], [], []
    for _ in range(x.max_seq_len + 2):
        energy = dot(tanh(Linear(model)(s) + enc), Linear(model)(s), reduce=model)  # [batch, enc_time]
        att_energies.append(energy)
        # a position: int32 with class dim enc_time; the energies as log-probabilities (unnormalised:
        # padded frames hold anything, the choice masks them)
        where = choice(energy, target=align, beam=5, input_type="log_prob", length_normalization=False)
        frame = dot(one_hot(where), enc, reduce=enc_time)  # the chosen encoder frame
        s = tanh(Linear(model)(frame) + Linear(model, with_bias=False)(s))
        scores = Linear(vocab)(s)
        logits.append(scores)
        label = choice(scores, target=y, beam=5)
        s = s + Embedding(model)(label)
        labels.append(label)
        positions.append(where)
        if end(label == 0):
            break
    mark_as_loss(cross_entropy(logits, y, axis=vocab), "ce")
    return {"output": labels, "positions": positions, "logits": logits, "energies": att_energies}

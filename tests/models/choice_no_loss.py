"""A `choice` decoder with no loss that returns only its labels: in training they are the target
(teacher forcing), so the training network computes with none of the parameters."""

from netc import Dim, Labels, Linear, Tensor, batch, choice, end, network, reduce_mean, tanh, zeros

enc_time = Dim("enc_time")
dec_time = Dim("dec_time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)
hidden = Dim("hidden", 6)


@network
def no_loss(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    context = tanh(Linear(hidden)(reduce_mean(x, axis=enc_time)))
    s = zeros(batch, hidden)
    labels = []
    for _ in range(2 * x.max_seq_len):
        s = tanh(Linear(hidden)(s) + context)
        label = choice(Linear(vocab)(s), target=y, beam=3)
        labels.append(label)
        if end(label == 0):
            break
    return {"output": labels}

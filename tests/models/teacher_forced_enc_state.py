"""Teacher forcing with carried states over the encoder's time: accumulated from the inputs
only, 3-D, stacked over the decoder steps and read after the loop."""

from netc import Dim, Embedding, Labels, Linear, Tensor, batch, dot, expand, network, reduce_sum, softmax, tanh, zeros

enc_time = Dim("enc_time")
dec_time = Dim("dec_time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)
hidden = Dim("hidden", 6)


@network
def teacher_forced(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc = tanh(Linear(hidden)(x))
    energy = reduce_sum(enc, axis=hidden)  # [batch, enc_time]
    acc = 0.0 * energy
    acc3 = 0.0 * enc  # [batch, enc_time, hidden]
    s = zeros(batch, hidden)
    out = []
    accs = []
    for y_t in y:
        acc = acc + energy  # depends only on the inputs
        acc3 = acc3 + expand(Embedding(hidden)(y_t), enc_time) * enc
        att = softmax(acc + reduce_sum(acc3, axis=hidden), axis=enc_time)
        s = tanh(Linear(hidden)(dot(att, enc, reduce=enc_time)) + s)
        out.append(s)
        accs.append(acc)
    return {"output": out, "acc": acc, "acc3": acc3, "accs": accs}

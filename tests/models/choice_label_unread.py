"""A decoder whose `choice` label nothing reads (the scores and the stacked value come from before
the loop, a counter ends it): the choice still makes the loop a decoder, over the target's frames
in training and with a beam when searching (dead-code removal kept it)."""

from netc import Dim, Labels, Linear, Tensor, batch, choice, end, network, reduce_max, zeros

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 4)
vocab = Dim("vocab", 3)


@network
def choice_label_unread(x: Tensor[batch, time, feat], y: Labels[batch, dec, vocab]):
    m = reduce_max(x, axis=time)
    cnt = zeros(batch)
    out = []
    for _ in range(20):
        cnt = cnt + 1.0
        choice(Linear(vocab)(m), target=y, beam=2)  # its label bound to nothing
        out.append(m * cnt)
        if end(cnt >= 3.0):
            break
    return {"cnt": cnt, "out": out}

"""Frames per sequence: `slice_frames` (each sequence's own last frame dropped, its first
dropped, its last two kept), `pad_frames` (frames before each sequence and after its own last
frame, of floats and of labels) and `shift_right` (a decoder's input labels: BOS, then the
labels without the last), on a batch with unequal lengths."""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Tensor,
    batch,
    network,
    pad_frames,
    reduce_sum,
    shift_right,
    slice_frames,
    softmax,
    tanh,
    zeros,
)

time = Dim("time")
dec_time = Dim("dec_time")
but_last = Dim("but_last")
but_first = Dim("but_first")
last_two = Dim("last_two")
padded = Dim("padded")
with_eos = Dim("with_eos")
feat = Dim("feat", 4)
vocab = Dim("vocab", 5)
emb = Dim("emb", 3)

BOS = 0


@network
def frames(x: Tensor[batch, time, feat], y: Labels[batch, dec_time, vocab]):
    h = tanh(Linear(feat)(x))
    head = slice_frames(h, axis=time, stop=-1, out_axis=but_last)  # x[:-1] of each sequence
    tail = slice_frames(h, axis=time, start=1, out_axis=but_first)  # x[1:]
    end = slice_frames(h, axis=time, start=-2, out_axis=last_two)  # x[-2:]
    around = pad_frames(h, axis=time, left=2, right=1, value=0.5, out_axis=padded)
    dec_in = shift_right(y, axis=dec_time, value=BOS)  # [batch, dec_time] labels
    eos = pad_frames(y, axis=dec_time, right=1, value=4, out_axis=with_eos)
    shifted = shift_right(h, axis=time, value=-1.0, amount=2)
    acc = zeros(batch, feat)
    for h_t in reversed(head):  # a loop over a sliced dim (RETURNN needs its lengths as a dim's size)
        acc = tanh(acc + h_t)
    return {
        "output": head - 2.0,
        "tail": tail,
        "last": end,
        "around": around,
        "weights": softmax(reduce_sum(around, axis=feat), axis=padded),
        "dec_in": Embedding(emb)(dec_in),
        "eos": eos,
        "shifted": shifted,
        "tail_sum": reduce_sum(tail, axis=but_first),
        "acc": acc,
    }

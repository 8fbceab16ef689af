"""mask_inf: -inf at a label's position (a shallow fusion's EOS threshold) and below a threshold."""

from netc import Dim, Tensor, batch, log_softmax, mask_inf, network, range_over, reduce_max, where

time = Dim("time")
vocab = Dim("vocab", 5)


@network
def eos_threshold(x: Tensor[batch, time, vocab]):
    scores = log_softmax(x, axis=vocab)
    eos = range_over(vocab) == 0  # [vocab]
    best_other = reduce_max(mask_inf(scores, eos), axis=vocab)  # [batch, time]
    return {
        "output": where(eos, mask_inf(scores, scores < best_other * 1.5), scores),
        "best_other": best_other,
        "below": mask_inf(x, x < 0.0),
    }

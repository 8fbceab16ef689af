"""CTC decoding on each target: greedy, prefix beam search without and with a bigram LM table
(a parameter of the model, log-softmaxed), over pooled frames (so padded frames follow each
sequence's own), with two label classes (repeats are frequent). Logits scaled up make frames
peaky, so that labels are decoded."""

from netc import (
    Bias,
    Dim,
    Linear,
    Tensor,
    batch,
    ctc_greedy,
    ctc_prefix_search,
    max_pool,
    network,
    tanh,
    zeros,
)

time = Dim("time")
frames = Dim("frames")  # after pooling: ceil(time / 2)
greedy_time = Dim("greedy_time")
search_time = Dim("search_time")
lm_time = Dim("lm_time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 2)
blank = Dim("blank", 1)
lm_context = Dim("lm_context", 3)  # the previous label, or the start


@network
def ctc_decoding(x: Tensor[batch, time, feat]):
    pooled = max_pool(tanh(x), axis=time, size=2, out_axis=frames)
    logits = 3.0 * Linear(vocab + blank)(pooled)
    greedy = ctc_greedy(logits, axis=vocab + blank, out_axis=greedy_time)
    labels, score = ctc_prefix_search(logits, axis=vocab + blank, beam=3, out_axis=search_time)
    lm = Bias((lm_context, vocab))(zeros(lm_context, vocab))  # scores of the next label
    lm_labels, lm_score = ctc_prefix_search(logits, axis=vocab + blank, beam=2, out_axis=lm_time, lm=lm, lm_weight=0.5)
    return {"greedy": greedy, "labels": labels, "score": score, "lm_labels": lm_labels, "lm_score": lm_score}

"""CTC search as flashlight-text's `LexiconFreeDecoder` (`method="flashlight"`): without an LM, with
its pruning (`beam_size_token`, `beam_threshold`) and merging by the maximum (`log_add=False`),
and with a bigram LM table. RETURNN refuses the method (located): `netc verify --no-returnn`
compares eager and torch. Logits scaled up make frames peaky, so that labels are decoded; two
label classes make repeats frequent."""

from netc import Bias, Dim, Linear, Tensor, batch, ctc_prefix_search, network, tanh, zeros

time = Dim("time")
search_time = Dim("search_time")
pruned_time = Dim("pruned_time")
lm_time = Dim("lm_time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 2)
blank = Dim("blank", 1)
lm_context = Dim("lm_context", 3)  # the previous label, or the start


@network
def ctc_decoding_flashlight(x: Tensor[batch, time, feat]):
    logits = 3.0 * Linear(vocab + blank)(tanh(x))
    labels, score = ctc_prefix_search(logits, axis=vocab + blank, beam=3, out_axis=search_time, method="flashlight")
    pruned_labels, pruned_score = ctc_prefix_search(
        logits,
        axis=vocab + blank,
        beam=2,
        out_axis=pruned_time,
        method="flashlight",
        beam_size_token=2,
        beam_threshold=4.0,
        log_add=False,
    )
    lm = Bias((lm_context, vocab))(zeros(lm_context, vocab))  # scores of the next label
    lm_labels, lm_score = ctc_prefix_search(
        logits, axis=vocab + blank, beam=3, out_axis=lm_time, lm=lm, lm_weight=0.5, method="flashlight"
    )
    return {
        "labels": labels,
        "score": score,
        "pruned_labels": pruned_labels,
        "pruned_score": pruned_score,
        "lm_labels": lm_labels,
        "lm_score": lm_score,
    }

"""CTC prefix search with a neural LM (`lm=` a step function of the model's modules, its state a
tuple; and `lm=` a Module, its state one tensor, also with `method="flashlight"`), beside the same
search without an LM. RETURNN refuses the LM function (located): `netc verify --no-returnn`
compares eager and torch. Logits scaled up make frames peaky, so that labels are decoded; two
label classes make repeats frequent."""

from netc import (
    Dim,
    Embedding,
    Linear,
    Module,
    Tensor,
    batch,
    concat,
    ctc_prefix_search,
    log_softmax,
    max_pool,
    network,
    tanh,
    zeros,
)

time = Dim("time")
frames = Dim("frames")  # after pooling: ceil(time / 2)
search_time = Dim("search_time")
lm_time = Dim("lm_time")
lm2_time = Dim("lm2_time")
fl_time = Dim("fl_time")
feat = Dim("feat", 4)
vocab = Dim("vocab", 3)
blank = Dim("blank", 1)
emb = Dim("emb", 3)
hidden = Dim("hidden", 5)


class RnnLm(Module):
    """A one-layer tanh RNN LM: the label's embedding and the state, log probabilities of the next."""

    def __init__(self):
        self.embed = Embedding(emb)
        self.step = Linear(hidden)
        self.out = Linear(vocab)

    def __call__(self, label, h):
        h = tanh(self.step(concat(self.embed(label), h)))
        return log_softmax(self.out(h), axis=vocab), h


def lm_step(label, state):
    h, c = state
    c = tanh(Linear(hidden)(concat(Embedding(emb)(label), h))) + 0.5 * c
    h = tanh(Linear(hidden, with_bias=False)(c))
    return log_softmax(Linear(vocab)(h), axis=vocab), (h, c)


@network
def ctc_decoding_lm(x: Tensor[batch, time, feat]):
    pooled = max_pool(tanh(x), axis=time, size=2, out_axis=frames)
    logits = 3.0 * Linear(vocab + blank)(pooled)
    labels, score = ctc_prefix_search(logits, axis=vocab + blank, beam=3, out_axis=search_time)
    lm = RnnLm()
    lm_labels, lm_score = ctc_prefix_search(
        logits, axis=vocab + blank, beam=3, out_axis=lm_time, lm=lm, lm_state=zeros(batch, hidden), lm_weight=0.7, bos=0
    )
    state = (zeros(batch, hidden), zeros(batch, hidden))
    fn_labels, fn_score = ctc_prefix_search(
        logits, axis=vocab + blank, beam=2, out_axis=lm2_time, lm=lm_step, lm_state=state, lm_weight=1.5, bos=2
    )
    fl_labels, fl_score = ctc_prefix_search(
        logits,
        axis=vocab + blank,
        beam=3,
        out_axis=fl_time,
        lm=lm,
        lm_state=zeros(batch, hidden),
        lm_weight=0.7,
        bos=0,
        method="flashlight",
        beam_size_token=3,
    )
    return {
        "labels": labels,
        "score": score,
        "lm_labels": lm_labels,
        "lm_score": lm_score,
        "fn_labels": fn_labels,
        "fn_score": fn_score,
        "fl_labels": fl_labels,
        "fl_score": fl_score,
    }

"""A decoder's beam search, then a CTC prefix search with an LM function and a transducer search
over a value of the decoder's last step, each from a state made after the loop: in eager mode's
search that value has a row per hypothesis and the new state one for the batch (a traceback of
tests/diffgen seed 7034). A search returns the decoder's stacks only; the searches after it run
in training and, unreturned, in eager mode's search too (`netc verify --search --no-returnn`)."""

from netc import (
    Dim,
    Embedding,
    GruCell,
    Labels,
    Linear,
    Tensor,
    batch,
    choice,
    concat,
    ctc_prefix_search,
    dot,
    end,
    full,
    log_softmax,
    network,
    tanh,
    transducer_search,
    zeros,
)

time = Dim("time")
dec = Dim("dec")
feat = Dim("feat", 4)
hidden = Dim("hidden", 5)
vocab = Dim("vocab", 4)
blank = Dim("blank", 1)
emb = Dim("emb", 3)
ctc_time = Dim("ctc_time")
rnnt_time = Dim("rnnt_time")


def lm(label, s):
    s = tanh(Linear(hidden)(concat(Embedding(emb)(label), s)))
    return log_softmax(Linear(vocab)(s), axis=vocab), s


def predict(label, s):
    s = tanh(Linear(hidden)(concat(Embedding(emb)(label), s)))
    return s, s


def joint(e, p):
    return Linear(vocab + blank)(tanh(Linear(hidden)(e) + Linear(hidden, with_bias=False)(p)))


@network
def lm_searches_after_a_choice_loop(x: Tensor[batch, time, feat], tgt: Labels[batch, dec, vocab]):
    s = zeros(batch, hidden)
    label = full(batch, value=0, class_dim=vocab)
    logits, labels = [], []
    for _ in range(6):
        ctx = dot(x, Linear(feat)(s), reduce=feat)
        ctx = dot(ctx, x, reduce=time)
        s = GruCell(hidden)(concat(Embedding(emb)(label), ctx), s)
        scores = Linear(vocab)(s)
        logits.append(scores)
        label = choice(scores, target=tgt, beam=2)
        labels.append(label)
        if end(label == 0):
            break
    frames = tanh(Linear(hidden)(x) + Linear(hidden)(ctx))
    ctc_labels, ctc_score = ctc_prefix_search(
        Linear(vocab + blank)(frames), axis=vocab + blank, beam=3, out_axis=ctc_time,
        lm=lm, lm_state=zeros(batch, hidden), bos=2, lm_weight=0.5,
    )  # fmt: skip
    rnnt_labels, rnnt_score = transducer_search(
        frames, axis=time, predict=predict, joint=joint, state=zeros(batch, hidden), label_dim=vocab,
        start=2, blank=0, beam=2, method="time_sync", max_sym_per_frame=2, out_axis=rnnt_time,
    )  # fmt: skip
    return {
        "labels": labels,
        "ctc_labels": ctc_labels,
        "ctc_score": ctc_score,
        "rnnt_labels": rnnt_labels,
        "rnnt_score": rnnt_score,
    }

"""A language model (LM) alone, and fused into an attention decoder's beam search (shallow fusion).

`lm` is a small recurrent LM over labels: trained with cross entropy on its targets,
searched with a beam from BOS (label 0, also EOS) without any input. `fused` is a small
attention encoder-decoder (AED, as examples/beam_search.py) whose search adds the LM's
log-probabilities, scaled by LM_SCALE, to its own: `choice(..., input_type="log_prob")` takes
the sum as it is, so a hypothesis' score is exactly the sum over its labels of
AM log-prob + LM_SCALE * LM log-prob. The LM runs only under `if searching():`, so training
the AED neither computes it nor trains its parameters. `aed` is the same AED without the LM.

The LM is the `Lm` module at the path `model_lm` in `lm` and `lm` in `fused`: a trained `lm`'s
torch parameters `model_lm.*` load into `fused`'s `lm.*` by module path
(`load_module_params("lm", state_dict, source="model_lm")`); RETURNN's names differ by the loop (`logp_2/rec/model_lm/...` against
`am_2/rec/lm/...`), which `netc module-params` maps for RETURNN's `preload_from_files` (see
docs/targets.md). tests/test_lm_fusion.py trains the LM, loads it and checks the scores.
"""

from netc import (
    Dim,
    Embedding,
    Labels,
    Linear,
    Module,
    Tensor,
    argmax,
    batch,
    choice,
    concat,
    cross_entropy,
    dot,
    end,
    log_softmax,
    mark_as_loss,
    network,
    searching,
    softmax,
    tanh,
    zeros,
)

enc_time = Dim("enc_time")
dec_time = Dim("dec_time")
feat = Dim("feat", 6)
vocab = Dim("vocab", 7)
emb = Dim("emb", 5)
hidden = Dim("hidden", 8)
EOS = 0  # also the first previous label (BOS)
LM_SCALE = 0.5
MAX_LM_STEPS = 12


class Lm(Module):
    """One step of the LM: the next label's log-probabilities and the new state."""

    def __init__(self):
        self.embed = Embedding(emb)
        self.rec = Linear(hidden)
        self.out = Linear(vocab)

    def __call__(self, label, h):
        h = tanh(self.rec(concat(self.embed(label), h)))
        return log_softmax(self.out(h), axis=vocab), h


@network
def lm(y: Labels[batch, dec_time, vocab]):
    model_lm = Lm()
    h = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)  # BOS
    logp, labels = [], []
    for _ in range(MAX_LM_STEPS):
        scores, h = model_lm(label, h)
        logp.append(scores)
        label = choice(scores, target=y, beam=4, input_type="log_prob")
        labels.append(label)
        if end(label == EOS):
            break
    mark_as_loss(cross_entropy(logp, y, axis=vocab), "ce")
    return {"output": labels, "logp": logp}


def decoder_step(enc, s, label):
    """The AED's step: the next label's log-probabilities and the new state."""
    att = softmax(dot(enc, Linear(hidden)(s), reduce=hidden), axis=enc_time)
    context = dot(att, enc, reduce=enc_time)
    s = tanh(Linear(hidden)(concat(Embedding(emb)(label), context)) + Linear(hidden, with_bias=False)(s))
    return log_softmax(Linear(vocab)(concat(s, context)), axis=vocab), s


@network
def fused(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc = tanh(Linear(hidden)(x))
    lm = Lm()
    s = zeros(batch, hidden)
    h = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)
    am, labels = [], []
    for _ in range(2 * x.max_seq_len):
        am_logp, s = decoder_step(enc, s, label)
        am.append(am_logp)
        if searching():  # the LM runs only in the search
            lm_logp, h = lm(label, h)
            scores = am_logp + LM_SCALE * lm_logp
        else:
            scores = am_logp
        label = choice(scores, target=y, beam=4, input_type="log_prob", length_normalization=False)
        labels.append(label)
        if end(label == EOS):
            break
    mark_as_loss(cross_entropy(am, y, axis=vocab), "ce")
    return {"output": labels, "am": am}


@network
def aed(x: Tensor[batch, enc_time, feat], y: Labels[batch, dec_time, vocab]):
    enc = tanh(Linear(hidden)(x))
    s = zeros(batch, hidden)
    label = argmax(zeros(batch, vocab), axis=vocab)
    am, labels = [], []
    for _ in range(2 * x.max_seq_len):
        am_logp, s = decoder_step(enc, s, label)
        am.append(am_logp)
        label = choice(am_logp, target=y, beam=4, input_type="log_prob", length_normalization=False)
        labels.append(label)
        if end(label == EOS):
            break
    mark_as_loss(cross_entropy(am, y, axis=vocab), "ce")
    return {"output": labels, "am": am}

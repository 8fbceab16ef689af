"""Misuse of `ctc_prefix_search` with an LM function (`lm=step, lm_state=, bos=`):
`file:line:col: error: ...`, the source line, a caret, exit code 1, no traceback. Each case is a
model file compiled by the real CLI (for torch, which runs the LM form)."""

from __future__ import annotations

import pytest
from conftest import check_located_case

HEADER = """\
from netc import Dim, Embedding, Linear, Module, Tensor, batch, concat, ctc_prefix_search, log_softmax, network, tanh, zeros
time = Dim("time")
out = Dim("out")
feat = Dim("feat", 6)
vocab = Dim("vocab", 5)
blank = Dim("blank", 1)
emb = Dim("emb", 3)
hidden = Dim("hidden", 4)
ctx = Dim("ctx", 6)


def lm(label, s):
    s = tanh(Linear(hidden)(concat(Embedding(emb)(label), s)))
    return log_softmax(Linear(vocab)(s), axis=vocab), s


def lm_no_state(label, s):
    return log_softmax(Linear(vocab)(Embedding(emb)(label)), axis=vocab)


def lm_other_dims(label, s):
    return Linear(hidden)(Embedding(emb)(label)), s


def lm_state_grows(label, s):
    return log_softmax(Linear(vocab)(Embedding(emb)(label)), axis=vocab), concat(s, Embedding(emb)(label))


def lm_zeros(label, s):
    return log_softmax(Linear(vocab)(zeros(batch, hidden)), axis=vocab), s


class Closure(Module):
    def __init__(self, h):
        self.h = h
    def __call__(self, label, s):
        return log_softmax(Linear(vocab)(s + self.h), axis=vocab), s


"""

SIG = "def f(x: Tensor[batch, time, feat]):"
LOGITS = "z = Linear(vocab + blank)(x)"
STATE = "zeros(batch, hidden)"


def _header_line(text: str) -> int:
    """A line of HEADER as a case's body line (counted from the signature's next line)."""
    return HEADER.splitlines().index(text) + 1 - HEADER.count("\n") - 2


def _search(**args: str) -> str:
    given = {"axis": "vocab + blank", "beam": "2", "out_axis": "out", **args}
    return "labels, score = ctc_prefix_search(z, " + ", ".join(f"{k}={v}" for k, v in given.items()) + ")"


CASES = [
    (
        "no_state",
        [LOGITS, _search(lm="lm", bos="0"), "return labels"],
        "`ctc_prefix_search` with an LM function needs `lm_state` (its state before `bos`) and `bos`",
        2,
        "ctc_prefix_search(",
    ),
    (
        "no_bos",
        [LOGITS, _search(lm="lm", lm_state=STATE), "return labels"],
        "`ctc_prefix_search` with an LM function needs `lm_state`",
        2,
        "ctc_prefix_search(",
    ),
    (
        "state_with_a_table",
        [LOGITS, _search(lm="zeros(ctx, vocab)", lm_state=STATE), "return labels"],
        "`ctc_prefix_search`: `lm_state` and `bos` go with an LM function",
        2,
        "ctc_prefix_search(",
    ),
    (
        "bos_outside_vocab",
        [LOGITS, _search(lm="lm", lm_state=STATE, bos="5"), "return labels"],
        "`ctc_prefix_search` needs `bos` to be a label of `vocab` (0 to 4), got 5",
        2,
        "ctc_prefix_search(",
    ),
    (
        "state_over_time",
        [LOGITS, _search(lm="lm", lm_state="x", bos="0"), "return labels"],
        "`ctc_prefix_search`'s `lm_state` must be [batch, static dims...], got [batch, time, feat]",
        2,
        "ctc_prefix_search(",
    ),
    (
        "returns_no_state",
        [LOGITS, _search(lm="lm_no_state", lm_state=STATE, bos="0"), "return labels"],
        "`ctc_prefix_search`: `lm(label, state)` must return (log_probs, state)",
        2,
        "ctc_prefix_search(",
    ),
    (
        "returns_other_dims",
        [LOGITS, _search(lm="lm_other_dims", lm_state=STATE, bos="0"), "return labels"],
        "`ctc_prefix_search`: `lm(label, state)` must return log probabilities [batch, vocab] of the next label, "
        "got float32[batch, hidden]",
        2,
        "ctc_prefix_search(",
    ),
    (
        "state_grows",
        [LOGITS, _search(lm="lm_state_grows", lm_state=STATE, bos="0"), "return labels"],
        "`ctc_prefix_search`: `lm` returns a state [batch, hidden+emb] for one [batch, hidden]: it must keep "
        "the state's dims",
        2,
        "ctc_prefix_search(",
    ),
    (
        "zeros_in_the_lm",
        [LOGITS, _search(lm="lm_zeros", lm_state=STATE, bos="0"), "return labels"],
        "`ctc_prefix_search`'s `lm` makes a [batch, ...] value from no argument (`zeros`)",
        _header_line("    return log_softmax(Linear(vocab)(zeros(batch, hidden)), axis=vocab), s"),
        "zeros(",
    ),
    (
        "reads_outside",
        ["h = zeros(batch, hidden)", LOGITS, _search(lm="Closure(h)", lm_state=STATE, bos="0"), "return labels"],
        "`ctc_prefix_search`'s `lm` reads a value from outside it (`h`)",
        _header_line("        return log_softmax(Linear(vocab)(s + self.h), axis=vocab), s"),
        "s + self.h",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_located_error(tmp_path, case):
    check_located_case(tmp_path, HEADER, SIG, case, target="torch")

"""Misuse of `ctc_greedy` and `ctc_prefix_search`: `file:line:col: error: ...`, the source line, a
caret at the call, exit code 1, no traceback. Each case is a model file compiled by the real CLI."""

from __future__ import annotations

import textwrap

import pytest
from conftest import assert_located_error

HEADER = """\
from netc import Dim, Linear, Tensor, batch, ctc_greedy, ctc_prefix_search, expand, network, zeros
time = Dim("time")
out = Dim("out")
feat = Dim("feat", 6)
vocab = Dim("vocab", 5)
blank = Dim("blank", 1)
two = Dim("two", 2)
ctx = Dim("ctx", 6)
"""

SIG = "def f(x: Tensor[batch, time, feat]):"
LOGITS = "z = Linear(vocab + blank)(x)"

# (name, body lines after the signature, message part, 1-based body line of the error, its call's text)
CASES = [
    (
        "classes_without_blank",
        ["return ctc_greedy(Linear(vocab)(x), axis=vocab, out_axis=out)"],
        "`ctc_greedy` needs `axis` to be the labels' class dim plus the blank: `vocab + blank`",
        1,
        "ctc_greedy(",
    ),
    (
        "blank_of_two",
        ["return ctc_greedy(Linear(vocab + two)(x), axis=vocab + two, out_axis=out)"],
        "`ctc_greedy` needs `axis` to be the labels' class dim plus the blank",
        1,
        "ctc_greedy(",
    ),
    (
        "no_time",
        ["return ctc_greedy(Linear(vocab + blank)(zeros(batch, feat)), axis=vocab + blank, out_axis=out)"],
        "`ctc_greedy` needs logits [batch, time, vocab+blank], got [batch, vocab+blank]",
        1,
        "ctc_greedy(",
    ),
    (
        "out_axis_of_the_input",
        [LOGITS, "return ctc_greedy(z, axis=vocab + blank, out_axis=time)"],
        "`time` already has lengths",
        2,
        "ctc_greedy(",
    ),
    (
        "out_axis_static",
        [LOGITS, "return ctc_greedy(z, axis=vocab + blank, out_axis=feat)"],
        "`ctc_greedy` makes a dynamic dim; `feat` is not one",
        2,
        "ctc_greedy(",
    ),
    (
        "beam_zero",
        [LOGITS, "labels, score = ctc_prefix_search(z, axis=vocab + blank, beam=0, out_axis=out)", "return labels"],
        "`ctc_prefix_search` needs a `beam` >= 1, got 0",
        2,
        "ctc_prefix_search(",
    ),
    (
        "lm_without_start_row",
        [
            LOGITS,
            "lm = zeros(two, vocab)",
            "labels, score = ctc_prefix_search(z, axis=vocab + blank, beam=2, out_axis=out, lm=lm)",
            "return labels",
        ],
        "`ctc_prefix_search` needs `lm` [lm_context, vocab] (or with batch), lm_context of size |vocab| + 1",
        3,
        "ctc_prefix_search(",
    ),
    (
        "lm_over_other_labels",
        [
            LOGITS,
            "lm = zeros(ctx, two)",
            "labels, score = ctc_prefix_search(z, axis=vocab + blank, beam=2, out_axis=out, lm=lm)",
            "return labels",
        ],
        "`ctc_prefix_search` needs `lm` [lm_context, vocab]",
        3,
        "ctc_prefix_search(",
    ),
    (
        "lm_weight_not_a_number",
        [
            LOGITS,
            'labels, score = ctc_prefix_search(z, axis=vocab + blank, beam=2, out_axis=out, lm_weight="a")',
            "return labels",
        ],
        "`lm_weight` is a number",
        2,
        "ctc_prefix_search(",
    ),
    (
        "in_a_loop",
        [
            "ys = []",
            "for x_t in x:",
            "    ys.append(ctc_greedy(Linear(vocab + blank)(expand(x_t, time)), axis=vocab + blank, out_axis=out))",
            "return x",
        ],
        "`ctc_greedy` makes a dim, which a loop body cannot: call it before the loop",
        3,
        "ctc_greedy(",
    ),
]


def _source(body: list[str]) -> str:
    return HEADER + "@network\n" + SIG + "\n" + textwrap.indent("\n".join(body), "    ") + "\n"


@pytest.mark.parametrize("name,body,message,line,call", CASES, ids=[c[0] for c in CASES])
def test_located_error(tmp_path, netc, name, body, message, line, call):
    src = _source(body)
    (tmp_path / f"{name}.py").write_text(src)
    proc = netc("compile", f"{name}.py", "--target", "returnn", cwd=tmp_path)
    assert_located_error(proc, src, f"{name}.py", HEADER.count("\n") + 2 + line, call, message)

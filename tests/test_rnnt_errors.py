"""Misuse of `rnnt_loss`: `file:line:col: error: ...`, the source line, a caret at the call, exit
code 1, no traceback. Each case is a model file compiled by the real CLI."""

from __future__ import annotations

import textwrap

import pytest
from conftest import assert_located_error

HEADER = """\
from netc import Dim, Labels, Linear, Tensor, argmax, batch, expand, network, rnnt_loss, zeros
time = Dim("time")
labels = Dim("labels")
pred = Dim("pred")
feat = Dim("feat", 6)
vocab = Dim("vocab", 5)
blank = Dim("blank", 1)
"""

SIG = "def f(x: Tensor[batch, time, pred, feat], y: Labels[batch, labels, vocab], v: Tensor[batch, labels, feat]):"

# (name, body lines after the signature, message part, 1-based body line of the error, its call's text)
CASES = [
    (
        "float_labels",
        ["return rnnt_loss(Linear(vocab + blank)(x), v, axis=vocab + blank, time_axis=time)"],
        "`rnnt_loss` needs int32 labels (e.g. a `Labels[...]` input), got a float32 tensor",
        1,
        "rnnt_loss(",
    ),
    (
        "classes_without_blank",
        ["return rnnt_loss(Linear(vocab)(x), y, axis=vocab, time_axis=time)"],
        "`rnnt_loss`: `vocab` (5) must be the labels' class dim `vocab` (5) plus the blank",
        1,
        "rnnt_loss(",
    ),
    (
        "logits_without_labels_axis",
        ["return rnnt_loss(Linear(vocab + blank)(zeros(batch, time, feat)), y, axis=vocab + blank, time_axis=time)"],
        "`rnnt_loss` needs logits [batch, time, labels+1, vocab+blank] (`time` and labels+1 dynamic, "
        "`vocab+blank` static), got [batch, time, vocab+blank]",
        1,
        "rnnt_loss(",
    ),
    (
        "logits_time_not_theirs",
        ["return rnnt_loss(Linear(vocab + blank)(x), y, axis=vocab + blank, time_axis=labels)"],
        "`rnnt_loss` needs logits [batch, labels, labels+1, vocab+blank]",
        1,
        "rnnt_loss(",
    ),
    (
        "labels_on_the_lattice",
        ["return rnnt_loss(Linear(vocab + blank)(expand(x, labels)), y, axis=vocab + blank, time_axis=time)"],
        "got [batch, time, labels, pred, vocab+blank]",
        1,
        "rnnt_loss(",
    ),
    (
        "labels_on_pred",
        [
            "z = Linear(vocab + blank)(zeros(batch, time, labels, feat))",
            "return rnnt_loss(z, y, axis=vocab + blank, time_axis=time)",
        ],
        "`rnnt_loss`: the labels need a dim of their own, not the logits' `labels` (the logits' `labels` "
        "has one frame more than the labels)",
        2,
        "rnnt_loss(",
    ),
    (
        "labels_without_class_dim",
        ["return rnnt_loss(Linear(vocab + blank)(x), y * 0, axis=vocab + blank, time_axis=time)"],
        "`rnnt_loss` needs labels with a class dim",
        1,
        "rnnt_loss(",
    ),
    (
        "labels_without_frames",
        [
            "y0 = argmax(Linear(vocab)(zeros(batch, feat)), axis=vocab)",
            "return rnnt_loss(Linear(vocab + blank)(x), y0, axis=vocab + blank, time_axis=time)",
        ],
        "`rnnt_loss` needs labels [batch, label_time], got [batch]",
        2,
        "rnnt_loss(",
    ),
    (
        "blank_index_range",
        ["return rnnt_loss(Linear(vocab + blank)(x), y, axis=vocab + blank, time_axis=time, blank_index=6)"],
        "`rnnt_loss` needs `blank_index` to be a class of `vocab+blank` (-6 to 5), got 6",
        1,
        "rnnt_loss(",
    ),
    (
        "time_axis_not_a_dim",
        ["return rnnt_loss(Linear(vocab + blank)(x), y, axis=vocab + blank, time_axis=3)"],
        "`rnnt_loss` needs `time_axis` to be one dim",
        1,
        "rnnt_loss(",
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

"""Misuse of the speech-model ops (max_pool, LstmCell, GruCell, Lstm direction, split/merge_dims, maximum,
minimum, clip, abs, `**`, dim arithmetic, fills over dynamic dims, label smoothing, ctc_loss):
`file:line:col: error: ...`, the source line, a caret, exit code 1, no traceback. Each case is a
model file compiled by the real CLI."""

from __future__ import annotations

import textwrap

import pytest
from conftest import assert_located_error

HEADER = """\
from netc import (Dim, GruCell, Labels, Linear, Lstm, LstmCell, Tensor, abs, argmax, batch, cast, clip, concat, cross_entropy,
                  ctc_loss, expand, full, max_pool, maximum, merge_dims, network, reduce_sum, split_dims, zeros)
time = Dim("time")
frames = Dim("frames")
pooled = Dim("pooled")
feat = Dim("feat", 6)
vocab = Dim("vocab", 5)
blank = Dim("blank", 1)
half = Dim("half", 3)
pieces = Dim("pieces", 2)
hidden = Dim("hidden", 4)
"""

SIG = "def f(x: Tensor[batch, time, feat], y: Labels[batch, frames, vocab]):"

# (name, body lines after the signature, message part, 1-based body line of the error, its call's text)
CASES = [
    (
        "pool_labels",
        ["return max_pool(y, axis=frames, size=2, out_axis=pooled)"],
        "`max_pool` needs a float tensor, got int32",
        1,
        "max_pool(",
    ),
    (
        "pool_static_axis",
        ["return max_pool(x, axis=feat, size=2, out_axis=pooled)"],
        "`max_pool` needs `axis` to be a dynamic dim of [batch, time, feat]",
        1,
        "max_pool(",
    ),
    (
        "pool_onto_input_dim",
        ["return max_pool(x, axis=time, size=2, out_axis=frames)"],
        "`frames` already has lengths",
        1,
        "max_pool(",
    ),
    (
        "pool_twice_onto_one_dim",
        [
            "a = max_pool(x, axis=time, size=2, out_axis=pooled)",
            "return max_pool(x, axis=time, size=3, out_axis=pooled)",
        ],
        "`pooled` already has lengths (of an input, a loop or another op)",
        2,
        "max_pool(",
    ),
    (
        "pool_static_out_axis",
        ["return max_pool(x, axis=time, size=2, out_axis=hidden)"],
        "`max_pool` makes a dynamic dim; `hidden` is not one",
        1,
        "max_pool(",
    ),
    (
        "pool_size_zero",
        ["return max_pool(x, axis=time, size=0, out_axis=pooled)"],
        "`max_pool` needs a window `size` >= 1, got 0",
        1,
        "max_pool(",
    ),
    (
        "pool_two_static_dims",
        ["z = split_dims(x, axis=feat, dims=(half, pieces))", "return max_pool(z, axis=time, size=2, out_axis=pooled)"],
        "`max_pool` pools [batch, time, feature], got [batch, time, half, pieces]",
        2,
        "max_pool(",
    ),
    (
        "pool_in_loop",
        ["out = []", "for x_t in x:", "    out.append(max_pool(x, axis=time, size=2, out_axis=pooled))", "return out"],
        "`max_pool` makes a dim, which a loop body cannot: call it before the loop",
        3,
        "max_pool(",
    ),
    (
        "zeros_before_its_dim_is_made",
        ["z = zeros(batch, pooled, feat)", "return max_pool(x, axis=time, size=2, out_axis=pooled) + z"],
        "`zeros` over dynamic dim `pooled`, whose lengths are not known here",
        1,
        "zeros(",
    ),
    (
        "expand_before_its_dim_is_made",
        ["e = expand(x, pooled)", "return max_pool(x, axis=time, size=2, out_axis=pooled) + e"],
        "`expand` over dynamic dim `pooled`, whose lengths are not known here",
        1,
        "expand(",
    ),
    (
        "expand_over_a_dim_nothing_makes",
        ["return expand(reduce_sum(x, axis=time), pooled)"],
        "`expand` over dynamic dim `pooled`, whose lengths are not known here",
        1,
        "expand(",
    ),
    (
        "full_label_out_of_range",
        ["return full(batch, value=5, class_dim=vocab)"],
        "label 5 is not a class of `vocab` (0..4)",
        1,
        "full(",
    ),
    (
        "full_float_label",
        ["return full(batch, value=0.5, class_dim=vocab)"],
        "`full` of dtype int32 needs an integer value, got 0.5",
        1,
        "full(",
    ),
    (
        "full_bad_dtype",
        ["return full(batch, value=1, dtype='int8')"],
        "`full` dtype must be one of 'float32', 'int32', 'bool', got 'int8'",
        1,
        "full(",
    ),
    (
        "full_class_dim_not_int",
        ["return full(batch, value=True, dtype='bool', class_dim=vocab)"],
        "`full` with a class dim makes int32 labels, not bool",
        1,
        "full(",
    ),
    (
        "split_dims_sizes",
        ["return split_dims(x, axis=feat, dims=(half, hidden))"],
        "`split_dims`: 3 * 4 is not the size of `feat` (6)",
        1,
        "split_dims(",
    ),
    (
        "split_dims_dynamic_axis",
        ["return split_dims(x, axis=time, dims=(half, pieces))"],
        "`split_dims` works on static dims; `time` is dynamic",
        1,
        "split_dims(",
    ),
    (
        "merge_dims_missing",
        ["return merge_dims(x, dims=(half, pieces), out_dim=feat)"],
        "`merge_dims`: `half` is not a dim of [batch, time, feat]",
        1,
        "merge_dims(",
    ),
    (
        "merge_dims_sizes",
        [
            "z = split_dims(x, axis=feat, dims=(half, pieces))",
            "return merge_dims(z, dims=(half, pieces), out_dim=hidden)",
        ],
        "`merge_dims`: 3 * 2 is not the size of `hidden` (4)",
        2,
        "merge_dims(",
    ),
    (
        "maximum_dtypes",
        ["return maximum(x, cast(x, 'int32'))"],
        "operands of `maximum` have different dtypes",
        1,
        "maximum(",
    ),
    (
        "maximum_bools",
        ["return maximum(cast(x, 'bool'), cast(x, 'bool'))"],
        "`maximum` needs float or int tensors, got bool",
        1,
        "maximum(",
    ),
    (
        "clip_bounds",
        ["return clip(x, 1.0, -1.0)"],
        "`clip(x, lo, hi)` takes numbers lo <= hi, got 1.0 and -1.0",
        1,
        "clip(",
    ),
    ("abs_of_bool", ["return abs(cast(x, 'bool'))"], "`abs` needs float or int tensors, got bool", 1, "abs("),
    ("pow_of_tensor", ["return x ** x"], "`**` takes a float tensor and a number: `x ** k`", 1, "x ** x"),
    ("pow_number_base", ["return 2.0 ** x"], "`**` takes a float tensor and a number: `x ** k`", 1, "2.0 ** x"),
    ("dim_plus_dynamic", ["return zeros(batch, feat + time)"], "concat needs static feature dims", 1, "feat + time"),
    (
        "dim_minus_dim",
        ["return zeros(batch, feat - vocab)"],
        "dims combine as `n * dim` (an integer) or `a + b` (two static dims)",
        1,
        "feat - vocab",
    ),
    (
        "label_smoothing_range",
        ["return cross_entropy(Linear(vocab)(zeros(batch, frames, feat)), y, axis=vocab, label_smoothing=0.9)"],
        "`label_smoothing` is a number from 0 to 0.8",
        1,
        "cross_entropy(",
    ),
    (
        "ctc_blank_missing",
        ["return ctc_loss(Linear(vocab)(x), y, axis=vocab)"],
        "`ctc_loss`: `vocab` (5) must be the labels' class dim `vocab` (5) plus the blank",
        1,
        "ctc_loss(",
    ),
    (
        "ctc_labels_on_logits_time",
        ["return ctc_loss(Linear(vocab + blank)(x), argmax(Linear(vocab)(x), axis=vocab), axis=vocab + blank)"],
        "`ctc_loss`: the labels need a dim of their own, not the logits' `time`",
        1,
        "ctc_loss(",
    ),
    (
        "ctc_logits_without_time",
        ["return ctc_loss(zeros(batch, vocab + blank), y, axis=vocab + blank)"],
        "`ctc_loss` needs logits [batch, time, vocab+blank], got [batch, vocab+blank]",
        1,
        "ctc_loss(",
    ),
    (
        "lstm_cell_one_arg",
        [
            "h = zeros(batch, hidden)",
            "out = []",
            "for x_t in x:",
            "    h = LstmCell(hidden)(x_t)",
            "    out.append(h)",
            "return out",
        ],
        "`LstmCell(out_dim)` is called as `cell(x, (h, c))`",
        4,
        "LstmCell(",
    ),
    (
        "lstm_cell_state_dims",
        [
            "h = zeros(batch, feat)",
            "out = []",
            "for x_t in x:",
            "    h, c = LstmCell(hidden)(x_t, (h, h))",
            "    out.append(h)",
            "return out",
        ],
        "`LstmCell` state h must be [batch, hidden], got [batch, feat]",
        4,
        "LstmCell(",
    ),
    (
        "lstm_cell_on_sequence",
        ["h = zeros(batch, hidden)", "return LstmCell(hidden)(x, (h, h))"],
        "`LstmCell` runs one step on [batch, feature], got [batch, time, feat]",
        2,
        "LstmCell(",
    ),
    (
        "gru_cell_with_lstm_state",
        [
            "h = zeros(batch, hidden)",
            "out = []",
            "for x_t in x:",
            "    h = GruCell(hidden)(x_t, (h, h))",
            "    out.append(h)",
            "return out",
        ],
        "`GruCell(out_dim)` is called as `cell(x, h)`",
        4,
        "GruCell(",
    ),
    (
        "gru_cell_state_dims",
        [
            "h = zeros(batch, feat)",
            "out = []",
            "for x_t in x:",
            "    h = GruCell(hidden)(x_t, h)",
            "    out.append(h)",
            "return out",
        ],
        "`GruCell` state must be [batch, hidden], got [batch, feat]",
        4,
        "GruCell(",
    ),
    (
        "gru_cell_on_sequence",
        ["h = zeros(batch, hidden)", "return GruCell(hidden)(x, h)"],
        "`GruCell` runs one step on [batch, feature], got [batch, time, feat]",
        2,
        "GruCell(",
    ),
    (
        "lstm_direction",
        ["return Lstm(hidden, direction=2)(x)"],
        "`Lstm` direction is 1 (forward) or -1 (backward), got 2",
        1,
        "Lstm(",
    ),
]


def _source(body: list[str]) -> str:
    return HEADER + "@network\n" + SIG + "\n" + textwrap.indent("\n".join(body), "    ") + "\n"


def _check(proc, src: str, name: str, message: str, line: int, call: str) -> None:
    assert_located_error(proc, src, f"{name}.py", HEADER.count("\n") + 2 + line, call, message)


@pytest.mark.parametrize("name,body,message,line,call", CASES, ids=[c[0] for c in CASES])
def test_located_error(tmp_path, netc, name, body, message, line, call):
    src = _source(body)
    (tmp_path / f"{name}.py").write_text(src)
    proc = netc("compile", f"{name}.py", "--target", "returnn", cwd=tmp_path)
    _check(proc, src, name, message, line, call)


def test_lstm_cell_state_from_elsewhere_is_a_returnn_target_error(tmp_path, netc):
    """RETURNN's `rnn_cell` keeps its own state: a cell fed another state is a RETURNN-target
    error at the cell; the torch target takes it."""
    body = [
        "h = zeros(batch, hidden)",
        "c = zeros(batch, hidden)",
        "out = []",
        "for x_t in x:",
        "    h2, c2 = LstmCell(hidden)(x_t, (h, c))",
        "    h = h2 * 0.5",
        "    c = c2",
        "    out.append(h)",
        "return out",
    ]
    src = _source(body)
    (tmp_path / "cell.py").write_text(src)
    proc = netc("compile", "cell.py", "--target", "returnn", cwd=tmp_path)
    _check(
        proc, src, "cell", "RETURNN target: `LstmCell`'s state must be the (h, c) this cell returned", 5, "LstmCell("
    )
    assert netc("compile", "cell.py", "--target", "torch", cwd=tmp_path).returncode == 0

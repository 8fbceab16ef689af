"""Misuse of the nn ops: `file:line:col: error: ...`, the source line, a caret, exit code 1,
no traceback (as in test_errors.py). Each case is a model file compiled by the real CLI."""

from __future__ import annotations

import pytest
from conftest import check_located_case

HEADER = """\
from netc import (Dim, Embedding, LayerNorm, Labels, Linear, Tensor, argmax, batch, cast, cross_entropy,
                  dropout, mask_inf, network, where, zeros)
time = Dim("time")
feat = Dim("feat", 8)
vocab = Dim("vocab", 5)
other = Dim("other", 5)
emb = Dim("emb", 3)
"""

SIG = "def f(x: Tensor[batch, time, feat], y: Labels[batch, time, vocab]):"

# (name, body lines after the signature, message part, 1-based body line of the error, its call's text)
CASES = [
    (
        "ce_labels_of_another_class_dim",
        ["logits = Linear(other)(x)", "return cross_entropy(logits, y, axis=other)"],
        "the labels' class dim is `vocab`, but `axis` is `other`",
        2,
        "cross_entropy(",
    ),
    (
        "ce_float_labels",
        ["logits = Linear(vocab)(x)", "return cross_entropy(logits, x, axis=vocab)"],
        "`cross_entropy` needs int32 labels (e.g. a `Labels[...]` input), got a float32 tensor",
        2,
        "cross_entropy(",
    ),
    (
        "ce_int_without_class_dim",
        ["logits = Linear(vocab)(x)", "return cross_entropy(logits, cast(x, 'int32'), axis=vocab)"],
        "`cross_entropy` needs labels with a class dim",
        2,
        "cross_entropy(",
    ),
    (
        "ce_axis_not_in_logits",
        ["return cross_entropy(x, y, axis=vocab)"],
        "`axis` `vocab` is not a dim of [batch, time, feat]",
        1,
        "cross_entropy(",
    ),
    (
        "ce_dynamic_axis",
        ["logits = Linear(vocab)(x)", "return cross_entropy(logits, y, axis=time)"],
        "`cross_entropy` needs a static class dim, `time` is dynamic",
        2,
        "cross_entropy(",
    ),
    (
        "ce_labels_dims_mismatch",
        [
            "logits = Linear(vocab)(x)",
            "out = []",
            "for y_t in y:",
            "    out.append(cross_entropy(logits, y_t, axis=vocab))",
            "return out",
        ],
        "labels [batch] must have the logits' dims without `vocab`: [batch, time]",
        4,
        "cross_entropy(",
    ),
    (
        "ce_logits_are_labels",
        ["return cross_entropy(y, y, axis=vocab)"],
        "`cross_entropy` needs a float tensor, got int32",
        1,
        "cross_entropy(",
    ),
    (
        "where_float_condition",
        ["return where(x, x, x)"],
        "`where` needs a bool condition, got float32",
        1,
        "where(",
    ),
    (
        "where_branch_dtypes_differ",
        ["return where(cast(x, 'bool'), x, cast(x, 'int32'))"],
        "`where` branches have different dtypes: float32 and int32",
        1,
        "where(",
    ),
    (
        "compare_dtypes_differ",
        ["return where(cast(x, 'int32') >= x, x, x)"],
        "operands of `>=` have different dtypes: int32 and float32",
        1,
        "cast(x, 'int32') >= x",
    ),
    (
        "where_int_with_float_number",
        ["return where(cast(x, 'bool'), cast(x, 'int32'), 0.5)"],
        "`where` cannot combine a tensor of dtype int32 with the number 0.5",
        1,
        "where(",
    ),
    (
        "where_string_branch",
        ["return where(cast(x, 'bool'), x, 'zero')"],
        "`where` expects a tensor, got",
        1,
        "where(",
    ),
    (
        "embedding_on_float",
        ["return Embedding(emb)(x)"],
        "`Embedding` needs int32 labels (e.g. a `Labels[...]` input), got a float32 tensor",
        1,
        "Embedding(",
    ),
    (
        "embedding_on_int_without_class_dim",
        ["return Embedding(emb)(cast(x, 'int32'))"],
        "`Embedding` needs labels with a class dim",
        1,
        "Embedding(",
    ),
    (
        "embedding_size_not_a_dim",
        ["return Embedding(3)(y)"],
        "Embedding(out_dim) needs a static dim",
        1,
        "Embedding(",
    ),
    (
        "embedding_bad_ctor",
        ["return Embedding()(y)"],
        "bad arguments to `Embedding`",
        1,
        "Embedding(",
    ),
    (
        "layer_norm_on_labels",
        ["return LayerNorm()(y)"],
        "`LayerNorm` needs a float tensor, got int32",
        1,
        "LayerNorm(",
    ),
    (
        "layer_norm_two_static_dims",
        ["h = zeros(batch, feat, emb)", "return LayerNorm()(h)"],
        "expected exactly one static feature dim, got [batch, feat, emb]",
        2,
        "LayerNorm(",
    ),
    (
        "argmax_over_batch",
        ["return argmax(x, axis=batch)"],
        "`argmax` over the batch dim is not allowed",
        1,
        "argmax(",
    ),
    (
        "argmax_over_missing_dim",
        ["return argmax(x, axis=vocab)"],
        "`axis` `vocab` is not a dim of [batch, time, feat]",
        1,
        "argmax(",
    ),
    (
        "argmax_of_labels",
        ["return argmax(y, axis=time)"],
        "`argmax` needs a float tensor, got int32",
        1,
        "argmax(",
    ),
    (
        "cast_unknown_dtype",
        ["return cast(x, 'float64')"],
        "`cast` dtype must be one of 'float32', 'int32', 'bool', got 'float64'",
        1,
        "cast(",
    ),
    (
        "dropout_probability_out_of_range",
        ["return dropout(x, 1.5)"],
        "`dropout` needs a probability 0 <= p < 1, got 1.5",
        1,
        "dropout(",
    ),
    (
        "dropout_without_p",
        ["return dropout(x)"],
        "bad arguments to `dropout`",
        1,
        "dropout(",
    ),
    (
        "dropout_on_labels",
        ["return dropout(y, 0.1)"],
        "`dropout` needs a float tensor, got int32",
        1,
        "dropout(",
    ),
    ("floordiv_by_zero", ["return y // 0"], "`// 0`: division by zero", 1, "y // 0"),
    ("floordiv_of_floats", ["return x // 2"], "`//` takes int32 tensors (labels' numbers), got float32", 1, "x // 2"),
    ("mod_of_a_number", ["return 3 % y"], "`3 % x` of a number and a tensor is not supported (`x % n` is)", 1, "3 % y"),
    ("mask_inf_of_labels", ["return mask_inf(y, y == 0)"], "`mask_inf` needs float scores, got int32", 1, "mask_inf("),
    (
        "mask_inf_float_condition",
        ["return mask_inf(x, x)"],
        "`mask_inf` needs a bool condition, got float32",
        1,
        "mask_inf(",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_located_error(tmp_path, case):
    check_located_case(tmp_path, HEADER, SIG, case, target="returnn")


def test_eager_run_of_a_valid_model_is_not_rejected():
    """The eager runtime does not know labels' class dims; the ops must still accept its values."""
    import numpy as np
    import torch
    from conftest import ROOT

    from netc_runtime.backends import _import_file

    net = _import_file(str(ROOT / "tests" / "models" / "ops_argmax.py"), "ops_argmax").pick
    out = net(x=torch.randn(2, 4, 6), time_lens=torch.tensor([4, 2]))
    assert out["emb"].shape == (2, 4, 3)
    assert out["output"].dtype == torch.int64
    assert np.isfinite(out["emb"].numpy()).all()

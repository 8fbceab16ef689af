"""Misuse of `Bias`: `file:line:col: error: ...`, the source line, a caret, exit code 1, no
traceback. Each case is a model file compiled by the real CLI."""

from __future__ import annotations

import pytest
from conftest import check_located_case

HEADER = """\
from netc import Bias, Dim, Labels, Tensor, batch, network
time = Dim("time")
frames = Dim("frames")
feat = Dim("feat", 6)
vocab = Dim("vocab", 5)
hidden = Dim("hidden", 4)
"""

SIG = "def f(x: Tensor[batch, time, feat], y: Labels[batch, frames, vocab]):"

# (name, body lines after the signature, message part, 1-based body line of the error, its call's text)
CASES = [
    ("bias_of_labels", ["return Bias(vocab)(y)"], "`Bias` needs a float tensor, got int32", 1, "Bias("),
    (
        "bias_over_other_dim",
        ["return Bias(hidden)(x)"],
        "`Bias` needs distinct static dims of the tensor [batch, time, feat], got (hidden)",
        1,
        "Bias(",
    ),
    (
        "bias_over_dynamic_dim",
        ["return Bias((time, feat))(x)"],
        "`Bias` needs distinct static dims of the tensor [batch, time, feat], got (time, feat)",
        1,
        "Bias(",
    ),
    (
        "bias_over_batch",
        ["return Bias(batch)(x)"],
        "`Bias` needs distinct static dims of the tensor [batch, time, feat], got (batch)",
        1,
        "Bias(",
    ),
    (
        "bias_twice_over_one_dim",
        ["return Bias((feat, feat))(x)"],
        "`Bias` needs distinct static dims of the tensor [batch, time, feat], got (feat, feat)",
        1,
        "Bias(",
    ),
    ("bias_over_no_dims", ["return Bias(())(x)"], "`Bias` needs distinct static dims of the tensor", 1, "Bias("),
    ("bias_of_a_number", ["return Bias(3)(x)"], "`Bias` needs distinct static dims", 1, "Bias("),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_located_error_of_bias(tmp_path, case):
    check_located_case(tmp_path, HEADER, SIG, case)

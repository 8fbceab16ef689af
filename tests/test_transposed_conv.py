"""`ConvTranspose1d` (a transposed 1-D convolution over time, RETURNN's `transposed_conv`):
misuse is a located error (`file:line:col: error: ...`, compiled by the real CLI). Its numbers on
every backend: tests/models/ops_transposed_conv.py (tests/test_models.py)."""

from __future__ import annotations

import textwrap

import pytest
from conftest import assert_located_error

HEADER = """\
from netc import ConvTranspose1d, Dim, Labels, Tensor, batch, network, split_dims
time = Dim("time")
frames = Dim("frames")
up = Dim("up")
feat = Dim("feat", 6)
hidden = Dim("hidden", 4)
half = Dim("half", 3)
vocab = Dim("vocab", 5)
chan = Dim("chan", 2)
"""
SIG = "def f(x: Tensor[batch, time, feat], y: Labels[batch, frames, vocab]):"

# (name, body, message part, its call's text)
CASES = [
    ("labels", "return ConvTranspose1d(hidden, 3, stride=2)(y, axis=frames, out_axis=up)",
     "`ConvTranspose1d` needs a float tensor, got int32", "ConvTranspose1d("),
    ("static_axis", "return ConvTranspose1d(hidden, 3, stride=2)(x, axis=feat, out_axis=up)",
     "`ConvTranspose1d` needs `axis` to be a dynamic dim of [batch, time, feat]", "ConvTranspose1d("),
    ("channels", "return ConvTranspose1d(hidden, 3)(split_dims(x, axis=feat, dims=(half, chan)), axis=time, out_axis=up)",
     "`ConvTranspose1d` upsamples [batch, time, feature], got [batch, time, half, chan]", "ConvTranspose1d("),
    ("filter_zero", "return ConvTranspose1d(hidden, 0)(x, axis=time, out_axis=up)",
     "`ConvTranspose1d` needs `filter_size` to be an int >= 1, got 0", "ConvTranspose1d("),
    ("stride_float", "return ConvTranspose1d(hidden, 3, stride=1.5)(x, axis=time, out_axis=up)",
     "`ConvTranspose1d` needs `stride` to be an int >= 1, got 1.5", "ConvTranspose1d("),
    ("padding", "return ConvTranspose1d(hidden, 3, padding='full')(x, axis=time, out_axis=up)",
     "`ConvTranspose1d` padding is 'same' or 'valid', got 'full'", "ConvTranspose1d("),
    ("out_dim_dynamic", "return ConvTranspose1d(frames, 3)(x, axis=time, out_axis=up)",
     "ConvTranspose1d(out_dim) needs a static dim", "ConvTranspose1d("),
    ("no_out_axis", "return ConvTranspose1d(hidden, 3)(x, axis=time)",
     "missing a required argument: 'out_axis'", "ConvTranspose1d("),
    ("out_axis_none", "return ConvTranspose1d(hidden, 3)(x, axis=time, out_axis=None)",
     "`ConvTranspose1d` makes a new dynamic dim: pass `out_axis=`", "ConvTranspose1d("),
    ("out_axis_with_lengths", "return ConvTranspose1d(hidden, 3)(x, axis=time, out_axis=frames)",
     "`frames` already has lengths", "ConvTranspose1d("),
    ("out_axis_static", "return ConvTranspose1d(hidden, 3)(x, axis=time, out_axis=half)",
     "`ConvTranspose1d` makes a dynamic dim; `half` is not one", "ConvTranspose1d("),
    ("call_args", "return ConvTranspose1d(hidden, 3)(x)", "missing a required argument: 'axis'", "ConvTranspose1d("),
]  # fmt: skip


@pytest.mark.parametrize("name,line,message,call", CASES, ids=[c[0] for c in CASES])
def test_located_error(tmp_path, netc, name, line, message, call):
    src = HEADER + "@network\n" + SIG + "\n" + textwrap.indent(line, "    ") + "\n"
    (tmp_path / f"{name}.py").write_text(src)
    proc = netc("compile", f"{name}.py", "--target", "returnn", cwd=tmp_path)
    assert_located_error(proc, src, f"{name}.py", HEADER.count("\n") + 3, call, message)

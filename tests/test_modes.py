"""`training()`: both modes on all three backends. `netc verify` runs recognition mode only
(tests/models/training_flag.py is in tests/test_models.py); here training mode too, each backend
against the others and the masked input against its definition."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_located_error

from netc.compiler import compile_graph
from netc_runtime.backends import run_eager, run_returnn, run_torch, valid_mask
from netc_runtime.verify import random_inputs, random_lengths, random_params

MODEL = str(Path(__file__).resolve().parent / "models" / "training_flag.py")


def _run_all(train: bool):
    g = compile_graph(MODEL)
    rng = np.random.default_rng(4)
    lens = random_lengths(g, 3, 6, rng)
    inputs, params = random_inputs(g, lens, rng), random_params(g, rng)
    res = {
        "eager": run_eager(MODEL, g, inputs, lens, params, train=train),
        "torch": run_torch(g, inputs, lens, params, train=train),
        "returnn": run_returnn(g, inputs, lens, params, train_flag=train),
    }
    return g, inputs, res


def _valid(g, r, name):
    return valid_mask(r.dims[name], r.lens[name], g, r.outputs[name].shape)


def test_training_flag_selects_per_mode_on_every_backend():
    outs = {}
    for train in (True, False):
        g, inputs, res = _run_all(train)
        for b, r in res.items():
            mask = _valid(g, r, "masked")
            want = inputs["x"] * (0.5 if train else 1.0)
            np.testing.assert_allclose(np.where(mask, r.outputs["masked"], 0), np.where(mask, want, 0), err_msg=b)
            for name in ("output", "last"):
                m = _valid(g, r, name)
                ref = res["eager"].outputs[name]
                diff = np.abs(np.where(m, r.outputs[name] - ref, 0)).max()
                assert diff <= 1e-4, (train, b, name, diff)
        outs[train] = res["eager"].outputs["output"]
    assert np.abs(outs[True] - outs[False]).max() > 1e-2  # the state update differs between the modes


HEADER = """\
from netc import Dim, Tensor, batch, network, training, where
time = Dim("time")
feat = Dim("feat", 4)
"""

# (name, body lines after the signature, message part, 1-based body line of the error, its call's text)
ERRORS = [
    ("arguments", ["return training(x)"], "bad arguments to `training`: too many positional arguments", 1, "training("),
    (
        "output_without_batch",
        ["return {'output': x, 't': training()}"],
        "output `t` has no `batch` dim; outputs are per sequence (select per-sequence values with it: "
        "`where(training(), a, b)`)",
        1,
        "return",
    ),
]


@pytest.mark.parametrize("name,body,message,line,call", ERRORS, ids=[c[0] for c in ERRORS])
def test_located_error(tmp_path, netc, name, body, message, line, call):
    src = HEADER + "@network\ndef f(x: Tensor[batch, time, feat]):\n" + textwrap.indent("\n".join(body), "    ") + "\n"
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    proc = netc("compile", path.name, "--target", "returnn", cwd=tmp_path)
    assert_located_error(proc, src, path.name, HEADER.count("\n") + 2 + line, call, message)

"""`netc import` of strided and "valid" 2-D convs (tests/import_configs/conv2d_strided.config,
matched against RETURNN on congruent lengths in test_import.py's CASES): RETURNN's "same" conv
with a time stride pads by the batch's longest length, netc's `Conv2d` by each sequence's own, so
the importer warns at the layer, the numbers differ exactly at the sequences whose length is not
congruent to the longest's modulo the stride, and the corpus runner's match stage draws lengths
that are multiples of the stride. Options netc does not have are located refusals."""

from __future__ import annotations

import json
import sys

import numpy as np
from conftest import ROOT, run_netc
from test_import import CONFIGS, _inputs, run_original

from netc.compiler import compile_graph
from netc.importer.checkpoint import model_value
from netc_runtime.backends import run_backend


def test_same_conv_with_time_stride_warns_and_differs_only_off_congruent_lengths(tmp_path):
    cfg, model, names = CONFIGS / "conv2d_strided.config", tmp_path / "model.py", tmp_path / "names.json"
    proc = run_netc("import", cfg, "-o", model, "--param-map", names, check=True)
    warning = f"{cfg}:19:5: warning: layer `conv1` (conv): RETURNN's 'same' conv with time stride 2 pads by"
    assert warning in proc.stderr and proc.stderr.count(": warning: ") == 1, proc.stderr
    names = json.loads(names.read_text())
    orig = run_original(cfg, [], [[9, 6, 3], [1, 1, 1]])  # 6 is not congruent to 9 modulo 2
    g = compile_graph(str(model))
    params = {names["params"][k]["returnn"]: model_value(v, names["params"][k]) for k, v in orig["params"].items()}
    inputs, lens = _inputs(g, orig)
    for backend in ("torch", "returnn"):
        res = run_backend(backend, str(model), inputs, lens, params, g)
        out = names["outputs"]["conv1_merged"]
        ours, theirs = res.outputs[out], orig["fetch"]["out:conv1_merged"]
        n = res.lens[out][next(d for d in res.dims[out] if d in res.lens[out])]
        assert list(n) == [5, 3, 2]
        diff = [float(np.abs(ours[b, :k] - theirs[b, :k]).max()) for b, k in enumerate(n)]
        assert diff[0] < 1e-5 and diff[2] < 1e-5 and diff[1] > 1e-3, (backend, diff)


def test_corpus_match_draws_multiples_of_a_time_stride(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    from corpus_match import pool_factors

    model = tmp_path / "model.py"
    run_netc("import", CONFIGS / "conv2d_strided.config", "-o", model, check=True)
    factors = pool_factors(compile_graph(str(model)))
    assert factors["time"] == 2 and factors["conv1_time"] == 1  # the "valid" conv after it: any length


def test_conv2d_options_netc_lacks_are_located_refusals(tmp_path):
    text = (CONFIGS / "conv2d_strided.config").read_text()
    for old, new, error in [
        ('"strides": (2, 2),', '"strides": (2, 1, 1),', "strides [2, 1, 1] (one positive int or one per axis"),
        ('"strides": (2, 2),', '"dilation_rate": (2, 1),', "dilation_rate [2, 1] (a 2-D conv: 1 is supported)"),
        ('"padding": "valid", "filter_size": (2, 2)', '"padding": "valid", "filter_size": (2, 5)',
         "filter_size 5 over the feature axis of 4"),
    ]:  # fmt: skip
        cfg = tmp_path / "bad.config"
        cfg.write_text(text.replace(old, new, 1))
        proc = run_netc("import", cfg, "-o", tmp_path / "model.py")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert f"{cfg}:" in proc.stderr and error in proc.stderr, proc.stderr

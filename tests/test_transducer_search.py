"""Transducer decoders from the training source, searched on all three backends: the one-label-per-
frame form (RNA-style: a `choice` over vocab + blank per encoder frame, the prediction state advanced
only on a label), greedy (beam 1) and with a beam; a `choice` loop whose end does not read the
labels."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT, run_netc

from netc.compiler import compile_graph
from netc_runtime.backends import run_backend
from netc_runtime.verify import random_inputs, random_lengths, random_params

MODELS = ROOT / "tests" / "models"
RNA = MODELS / "rna_decoder.py"


def _rna(directory, beam: int):
    text = RNA.read_text(encoding="utf-8")
    assert "\nBEAM = 3\n" in text
    path = directory / f"rna_beam{beam}.py"
    path.write_text(text.replace("\nBEAM = 3\n", f"\nBEAM = {beam}\n"), encoding="utf-8")
    return path


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("search", [False, True])
def test_rna_decoder_verifies(tmp_path, beam, search):
    proc = run_netc("verify", _rna(tmp_path, beam), "--seed", "3", *(["--search"] if search else []))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "output           eager vs returnn" in proc.stdout and proc.stdout.rstrip().endswith("verify: ok")
    assert ("scores           eager vs returnn" in proc.stdout) == search


def test_rna_search_emits_one_class_per_frame_and_greedy_is_the_best_label(tmp_path):
    """The search's lengths are the frames'; with beam 1 each frame's class is the argmax of the
    scores the search returns for it (the prediction state advanced on the labels chosen before)."""
    path = _rna(tmp_path, 1)
    g = compile_graph(str(path))
    rng = np.random.default_rng(5)
    lens = random_lengths(g, 3, 7, rng)
    inputs = {k: v for k, v in random_inputs(g, lens, rng).items() if k == "x"}
    params = random_params(g, rng)
    params["logits_2/rec/scores/b"][4] += 1.0  # blanks and labels both chosen
    for backend in ("eager", "torch"):
        res = run_backend(backend, str(path), inputs, {"time": lens["time"]}, params, g, search=True)
        assert list(res.lens["output"]["time"]) == list(lens["time"])
        for b, n in enumerate(lens["time"]):
            want = res.outputs["logits"][b, :n].argmax(-1)
            assert res.outputs["output"][b, :n].tolist() == want.tolist()
        chosen = np.concatenate([res.outputs["output"][b, :n] for b, n in enumerate(lens["time"])])
        assert (chosen == 4).any() and (chosen != 4).any()


def test_search_whose_end_does_not_read_the_labels():
    proc = run_netc("verify", MODELS / "search_end_of_steps.py", "--search", "--seed", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scores           eager vs returnn" in proc.stdout and proc.stdout.rstrip().endswith("verify: ok")

"""Transducer decoders from the training source, searched on all three backends: the one-label-per-
frame form (RNA-style: a `choice` over vocab + blank per encoder frame, the prediction state advanced
only on a label), greedy (beam 1) and with a beam; a `choice` loop whose end does not read the
labels."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT, verify_in_process

from netc.compiler import compile_graph
from netc_runtime.backends import BACKENDS, run_backend
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
    proc = verify_in_process(_rna(tmp_path, beam), "--seed", "3", *(["--search"] if search else []))
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
    proc = verify_in_process(MODELS / "search_end_of_steps.py", "--search", "--seed", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scores           eager vs returnn" in proc.stdout and proc.stdout.rstrip().endswith("verify: ok")


def _time_sync_reference(x: np.ndarray, n: int, p: dict) -> list[list[int]]:
    """Greedy time-synchronous decoding of one sequence, in numpy: per frame its 3 symbols."""
    enc = np.tanh(x[:n] @ p["enc/W"] + p["enc/b"])

    def prediction(label, s):
        return np.tanh(
            np.concatenate([p["prediction/embed/W"][label], s]) @ p["prediction/step/W"] + p["prediction/step/b"]
        )

    s = prediction(4, np.zeros(6))
    frames = []
    for e in enc:
        more, symbols = True, []
        for _ in range(3):
            h = np.tanh(e @ p["joint/enc/W"] + p["joint/enc/b"] + s @ p["joint/pred/W"])
            best = int(np.argmax(h @ p["joint/out/W"] + p["joint/out/b"]))
            more = more and best != 4
            if more:
                s = prediction(best, s)
            symbols.append(best if more else 4)
        frames.append(symbols)
    return frames


def test_time_synchronous_greedy_decoding_is_the_reference():
    """At most 3 symbols per frame, until the blank: every backend decodes as numpy does, on
    parameters where frames end after 0, 1, 2 and 3 labels."""
    path = MODELS / "transducer_time_sync.py"
    g = compile_graph(str(path))
    rng = np.random.default_rng(4)
    lens = random_lengths(g, 3, 7, rng)
    inputs = random_inputs(g, lens, rng)
    params = random_params(g, rng)
    params["joint/out/b"][4] += 0.8  # blanks and labels both chosen
    want = [_time_sync_reference(inputs["x"][b], n, params) for b, n in enumerate(lens["time"])]
    counts = {sum(s != 4 for s in frame) for seq in want for frame in seq}
    assert counts == {0, 1, 2, 3}, counts
    for backend in BACKENDS:
        res = run_backend(backend, str(path), inputs, lens, params, g)
        for b, n in enumerate(lens["time"]):
            got = np.stack([res.outputs[f"sym{k}"][b, :n] for k in range(3)], axis=1)
            assert got.tolist() == want[b], backend

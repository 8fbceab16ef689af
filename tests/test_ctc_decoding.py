"""CTC decoding (`ctc_greedy`, `ctc_prefix_search`) against the plain-Python references of
tests/ctc_reference.py: the functions eager mode and the torch module run (netc.ops.ctc_search)
on random small cases, the reference against an exhaustive search; the targets agree with each
other through `netc verify` (tests/models/ctc_decoding.py in test_models.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from conftest import EXAMPLES
from ctc_reference import exhaustive, greedy, prefix_beam_search

from netc.compiler import compile_graph
from netc.ops.ctc_search import ctc_greedy_decode, ctc_prefix_beam_search
from netc_runtime.backends import BACKENDS, run_backend
from netc_runtime.verify import random_inputs, random_params


def _case(rng: random.Random, frames: int, classes: int, scale: float = 2.0) -> list[list[float]]:
    # float32 values, so that the references see what torch sees
    rows = [[rng.gauss(0.0, scale) for _ in range(classes)] for _ in range(frames)]
    return torch.tensor(rows, dtype=torch.float32).reshape(frames, classes).double().tolist()


def _search(logits, beam, lm=None, weight=0.0, classes=3):
    x = torch.tensor(logits, dtype=torch.float64).reshape(1, len(logits), len(logits[0]) if logits else classes)
    table = None if lm is None else torch.tensor(lm, dtype=torch.float64)[None]
    labels, lens, score = ctc_prefix_beam_search(x, torch.tensor([len(logits)]), beam, table, weight)
    return labels[0, : lens[0]].tolist(), float(score[0])


def test_reference_without_pruning_is_exhaustive():
    """A beam as large as the number of prefixes prunes nothing: the best of all label sequences."""
    rng = random.Random(0)
    for _ in range(60):
        classes = rng.randint(2, 4)
        logits = _case(rng, rng.randint(1, 5), classes)
        lm = [[rng.gauss(0.0, 1.0) for _ in range(classes - 1)] for _ in range(classes)] if rng.random() < 0.5 else None
        weight = rng.uniform(0.1, 1.5)
        probs = exhaustive(logits, lm, weight)
        best = max(probs, key=probs.__getitem__)
        labels, score = prefix_beam_search(logits, 10**6, lm, weight)
        assert labels == list(best) and score == pytest.approx(probs[best], abs=1e-9)


@pytest.mark.parametrize("with_lm", [False, True])
def test_prefix_search_is_the_reference(with_lm):
    """Same labels and scores on random cases: beams 1..8, 2..4 classes (repeats are frequent)."""
    rng = random.Random(1 + with_lm)
    for _ in range(150):
        classes, beam = rng.randint(2, 4), rng.randint(1, 8)
        logits = _case(rng, rng.randint(0, 7), classes)
        lm = [[rng.gauss(0.0, 1.0) for _ in range(classes - 1)] for _ in range(classes)] if with_lm else None
        weight = rng.uniform(0.1, 1.5) if with_lm else 0.0
        labels, score = _search(logits, beam, lm, weight, classes)
        ref_labels, ref_score = prefix_beam_search(logits, beam, lm, weight)
        assert labels == ref_labels and score == pytest.approx(ref_score, abs=1e-9)


def test_edge_cases():
    """Blank-only frames decode to nothing (score: the blank path's); a repeat without a blank
    between is one label, with a blank two; no frames: no labels, log 1."""
    blank_only = [[0.0, 0.0, 9.0]] * 4
    assert _search(blank_only, 3)[0] == [] and greedy(blank_only) == []
    assert _search(blank_only, 3)[1] == pytest.approx(prefix_beam_search(blank_only, 3)[1], abs=1e-9)
    repeated = [[9.0, 0.0, 0.0], [9.0, 0.0, 0.0], [0.0, 0.0, 9.0], [9.0, 0.0, 0.0]]
    assert _search(repeated, 4)[0] == [0, 0] == greedy(repeated)
    assert _search([], 2) == ([], 0.0) == prefix_beam_search([], 2)


def test_beam_one_on_peaky_frames_is_greedy():
    """With one class near certain per frame, the best path carries the prefix's probability:
    beam 1 (and a wide beam) find the greedy labels."""
    rng = random.Random(3)
    for _ in range(100):
        logits = _case(rng, rng.randint(1, 8), rng.randint(2, 5), scale=30.0)
        assert _search(logits, 1)[0] == greedy(logits) == _search(logits, 6)[0]


def test_batch_with_padding_is_each_sequence():
    """Padded frames of shorter sequences change nothing; greedy and search per sequence."""
    rng = random.Random(4)
    lens = [7, 0, 3, 5, 1]
    x = torch.tensor([_case(rng, 7, 4) for _ in lens], dtype=torch.float32)
    labels, out_lens, scores = ctc_prefix_beam_search(x, torch.tensor(lens), 3, None, 0.0)
    g_labels, g_lens = ctc_greedy_decode(x, torch.tensor(lens))
    for b, n in enumerate(lens):
        seq = x[b, :n].double().tolist()
        ref_labels, ref_score = prefix_beam_search(seq, 3)
        assert labels[b, : out_lens[b]].tolist() == ref_labels
        assert float(scores[b]) == pytest.approx(ref_score, abs=1e-9)
        assert g_labels[b, : g_lens[b]].tolist() == greedy(seq)
        assert (labels[b, out_lens[b] :] == 0).all() and (g_labels[b, g_lens[b] :] == 0).all()


def test_conformer_example_decodes_as_the_reference():
    """examples/conformer_ctc.py's decoder, with a training network's parameters, on each
    backend: greedy and prefix search labels (and the score) as the references find them from its
    log probabilities; the beam finds another prefix than greedy somewhere, never a worse one."""
    example = EXAMPLES / "conformer_ctc.py"
    train = compile_graph(str(example), network="conformer_ctc")
    g = compile_graph(str(example), network="conformer_ctc_decode")
    sizes = {d.name: d.size for d in g.dims}
    assert {p.name: p.dims for p in g.params} == {p.name: p.dims for p in train.params}
    rng = np.random.default_rng(7)
    params = random_params(train, rng)
    params["logits/W"] *= 0.5  # flatter frames: prefixes whose alignments add up beat the best path
    lens = {"time": np.array([40, 23, 31, 9])}
    x = {"x": random_inputs(g, lens, rng)["x"]}
    frames = [(n + 1) // 2 for n in lens["time"]]
    differs = False
    for backend in BACKENDS:
        res = run_backend(backend, str(example), x, lens, params, g)
        for b, n in enumerate(frames):
            logp = res.outputs["output"][b, :n].astype(np.float64).tolist()
            assert len(logp[0]) == sizes["vocab+blank"]
            greedy_n = res.lens["greedy"]["greedy_time"][b]
            assert res.outputs["greedy"][b, :greedy_n].tolist() == greedy(logp), backend
            labels, score = prefix_beam_search(logp, 4)
            n_labels = res.lens["labels"]["search_time"][b]
            assert res.outputs["labels"][b, :n_labels].tolist() == labels, backend
            assert abs(float(res.outputs["score"][b]) - score) <= 1e-4, backend
            differs |= labels != greedy(logp)
            assert score >= prefix_beam_search(logp, 1)[1] - 1e-9
    assert differs

"""`ctc_prefix_search(..., method="flashlight")`: flashlight-text's `LexiconFreeDecoder` search (the
decoder torchaudio's `ctc_decoder(lexicon=None)` wraps; bench/check_ctc_flashlight.py checks it
against flashlight-text itself). The functions eager mode and the torch module run
(netc.ops.ctc_search) against the plain-Python reference of tests/ctc_reference.py on random small
cases (pruning by token and threshold, merging by log-add or maximum, bigram and neural LMs), the
targets through `netc verify --no-returnn`, RETURNN's located refusal, the options' errors."""

from __future__ import annotations

import math
import random

import pytest
import torch
from conftest import ROOT, run_netc
from ctc_reference import exhaustive, flashlight_search, prefix_beam_search
from test_ctc_decoding_lm import RnnLm

from netc.ops.ctc_search import ctc_flashlight_search, ctc_flashlight_search_lm

MODEL = ROOT / "tests" / "models" / "ctc_decoding_flashlight.py"
LM_MODEL = ROOT / "tests" / "models" / "ctc_decoding_lm.py"


def _case(rng: random.Random, frames: int, classes: int, scale: float = 2.0) -> list[list[float]]:
    rows = [[rng.gauss(0.0, scale) for _ in range(classes)] for _ in range(frames)]
    return torch.tensor(rows, dtype=torch.float32).reshape(frames, classes).double().tolist()


def _options(rng: random.Random, classes: int) -> tuple[int, float, bool]:
    size = rng.choice([0, 0, rng.randint(1, classes)])
    return size, rng.choice([math.inf, rng.uniform(0.5, 6.0)]), rng.random() < 0.6


def _search(logits, beam, classes, lm=None, weight=0.0, options=(0, math.inf, True)):
    x = torch.tensor(logits, dtype=torch.float64).reshape(1, len(logits), classes)
    table = None if lm is None else torch.tensor(lm, dtype=torch.float64)[None]
    labels, lens, score = ctc_flashlight_search(x, torch.tensor([len(logits)]), beam, table, weight, *options)
    return labels[0, : lens[0]].tolist(), float(score[0])


def test_reference_without_pruning_is_exhaustive():
    """With nothing pruned (a large beam, no threshold) and log-add merges, the hypotheses of a
    prefix sum all its alignments: the best of all label sequences."""
    rng = random.Random(20)
    for _ in range(60):
        classes = rng.randint(2, 4)
        logits = _case(rng, rng.randint(1, 5), classes)
        lm = [[rng.gauss(0.0, 1.0) for _ in range(classes - 1)] for _ in range(classes)] if rng.random() < 0.5 else None
        weight = rng.uniform(0.1, 1.5)
        probs = exhaustive(logits, lm, weight)
        best = max(probs, key=probs.__getitem__)
        labels, score = flashlight_search(logits, 10**6, lm, weight)
        assert labels == list(best) and score == pytest.approx(probs[best], abs=1e-9)


@pytest.mark.parametrize("with_lm", [False, True])
def test_search_is_the_reference(with_lm):
    """Same labels and scores on random cases (beams 1..6, 2..5 classes, the options drawn); the
    search differs from the standard prefix search in some of them."""
    rng = random.Random(21 + with_lm)
    differs = 0
    for _ in range(200):
        classes, beam = rng.randint(2, 5), rng.randint(1, 6)
        logits = _case(rng, rng.randint(0, 8), classes)
        lm = [[rng.gauss(0.0, 1.0) for _ in range(classes - 1)] for _ in range(classes)] if with_lm else None
        weight = rng.uniform(0.1, 1.5) if with_lm else 0.0
        options = _options(rng, classes)
        labels, score = _search(logits, beam, classes, lm, weight, options)
        ref_labels, ref_score = flashlight_search(logits, beam, lm, weight, *options)
        assert labels == ref_labels and score == pytest.approx(ref_score, abs=1e-9)
        differs += labels != prefix_beam_search(logits, beam, lm, weight)[0]
    assert differs >= 5, differs


def test_search_with_an_lm_function_is_the_reference():
    """A neural LM (each slot carrying its state): labels and scores as the reference's with the LM
    as a function of the prefix; a padded batch is each sequence; the LM runs on new prefixes only."""
    rng = random.Random(23)
    for _ in range(40):
        classes, beam = rng.randint(2, 4), rng.randint(1, 5)
        lm = RnnLm(rng, classes - 1, rng.randint(1, 3))
        lens = [rng.randint(0, 7) for _ in range(3)]
        x = torch.tensor([_case(rng, max(lens), classes) for _ in lens], dtype=torch.float64)
        bos, weight, options = rng.randrange(classes - 1), rng.uniform(0.3, 2.0), _options(rng, classes)
        state = (torch.zeros(len(lens), lm.hidden, dtype=torch.float64),)
        labels, out_lens, scores = ctc_flashlight_search_lm(
            x, torch.tensor(lens), beam, lm.torch_step, state, bos, weight, *options
        )
        for b, n in enumerate(lens):
            ref_labels, ref_score = flashlight_search(x[b, :n].tolist(), beam, lm.next_log_probs(bos), weight, *options)
            assert labels[b, : out_lens[b]].tolist() == ref_labels
            assert float(scores[b]) == pytest.approx(ref_score, abs=1e-9)
            assert (labels[b, out_lens[b] :] == 0).all()


def test_hypotheses_are_prefix_and_ending():
    """Two frames, one label likely then the label again or a blank: the prefix [0] has a
    hypothesis ending in the label and one in the blank; with beam 1 only the better survives
    (its score alone), with beam 2 both merge at the end (log-added, or the maximum)."""
    logits = [[3.0, 0.0, 0.0], [1.0, -9.0, 0.5]]
    lp = [[v - math.log(sum(math.exp(w) for w in row)) for v in row] for row in logits]
    on_label, on_blank = lp[0][0] + lp[1][0], lp[0][0] + lp[1][2]
    assert _search(logits, 1, 3) == ([0], pytest.approx(max(on_label, on_blank), abs=1e-12))
    both = math.log(math.exp(on_label) + math.exp(on_blank))
    assert _search(logits, 2, 3)[1] == pytest.approx(both, abs=1e-12)
    assert _search(logits, 2, 3, options=(0, math.inf, False))[1] == pytest.approx(max(on_label, on_blank), abs=1e-12)
    # beam_size_token 1: only the frame's best class follows each hypothesis (frame 2: the label)
    assert _search(logits, 2, 3, options=(1, math.inf, True)) == ([0], pytest.approx(on_label, abs=1e-12))
    # a threshold below the gap drops the worse candidate before it merges
    assert _search(logits, 2, 3, options=(0, 1e-6, True))[1] == pytest.approx(on_label, abs=1e-12)


def test_verify_compares_eager_and_torch_returnn_refuses_located():
    proc = run_netc("verify", str(MODEL), "--no-returnn", "--seed", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split()[:4] for line in proc.stdout.splitlines() if " vs " in line]
    names = ["labels", "score", "pruned_labels", "pruned_score", "lm_labels", "lm_score"]
    assert rows == [[n, "eager", "vs", "torch"] for n in names], proc.stdout
    line = next(i for i, text in enumerate(MODEL.read_text().splitlines(), 1) if "labels, score = " in text)
    proc = run_netc("compile", str(MODEL), "--target", "returnn", "-o", "/dev/null")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert (
        f'ctc_decoding_flashlight.py:{line}:21: error: RETURNN target: `ctc_prefix_search(..., method="flashlight")` '
        "has no RETURNN form" in proc.stderr
    )


BAD = [
    ('method="beam"', '`ctc_prefix_search` has `method` "prefix" or "flashlight", got \'beam\''),
    ("beam_size_token=2", '`ctc_prefix_search`: `beam_size_token` goes with `method="flashlight"`'),
    ("log_add=False", '`ctc_prefix_search`: `log_add` goes with `method="flashlight"`'),
    ('method="flashlight", beam_size_token=0', "`ctc_prefix_search` needs `beam_size_token` None or >= 1, got 0"),
    ('method="flashlight", beam_threshold=-1.0', "needs `beam_threshold` None or a number >= 0, got -1.0"),
    ('method="flashlight", log_add=1', "`ctc_prefix_search` needs `log_add` True or False, got 1"),
]


@pytest.mark.parametrize("args, message", BAD, ids=[b[0] for b in BAD])
def test_bad_options_are_located_errors(tmp_path, args, message):
    src = MODEL.read_text().replace('out_axis=search_time, method="flashlight")', f"out_axis=search_time, {args})")
    path = tmp_path / "m.py"
    path.write_text(src)
    line = next(i for i, text in enumerate(src.splitlines(), 1) if "labels, score = " in text)
    proc = run_netc("compile", str(path), "--target", "torch", "-o", "/dev/null")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"m.py:{line}:" in proc.stderr and message in proc.stderr, proc.stderr

"""Every example verifies across eager, RETURNN and torch through the real `netc verify`."""

from __future__ import annotations

import re

import pytest
from conftest import EXAMPLES, example_network

MODELS = sorted(p.name for p in EXAMPLES.glob("*.py"))
# CTC's labels fit the encoder's frames, 8x fewer than the input's: at the default --max-len 7,
# one frame and one label per sequence
# the streaming Conformer's chunks are 4 encoder frames (8 input frames): sequences of several chunks
OPTIONS = {"librispeech_2018.py": ["--max-len", "17"], "conformer_streaming.py": ["--max-len", "25"]}
HOISTING = ["hoist", "no-hoist", "no-whole-sequence"]
# the largest example (18 s a run here) with the passes' defaults only: its encoder's constructs
# are conformer_ctc's, which runs with every option set, and the random-program tester runs
# decoders growing `cum_concat` states with every option set
DEFAULTS_ONLY = {"conformer_aed.py"}


def _cases(models: list[str]) -> list[tuple[str, str]]:
    return [(m, h) for m in models for h in HOISTING if m not in DEFAULTS_ONLY or h == "hoist"]


@pytest.mark.parametrize("model, hoisting", _cases(MODELS))
def test_example_verifies(verify, model, hoisting):
    """With all hoisting, none, and without the kinds that keep whole sequences in memory."""
    network = example_network(EXAMPLES / model)
    options = [*OPTIONS.get(model, []), *(["--network", network] if network else [])]
    proc = verify(EXAMPLES / model, "--seed", "1", f"--{hoisting}", *options)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    lens = re.search(r"lengths (.*)", proc.stdout).group(1)
    for part in lens.split("], "):
        values = [int(v) for v in re.findall(r"\d+", part.split("=")[1])]
        assert len(set(values)) > 1, f"lengths must differ across the batch: {lens}"
    rows = re.findall(r"eager vs (\w+)\s+max\|Δ\| = (\S+)\s+\((\d+) valid", proc.stdout)
    assert {b for b, _, _ in rows} == {"torch", "returnn"}
    for backend, diff, frames in rows:
        assert float(diff) <= 1e-4, (backend, diff)
        assert int(frames) > 0


# the other networks of a file that are not decoders with tests of their own (example_network takes
# the first): the streaming Conformer's chunk-by-chunk network
OTHER_NETWORKS = [("conformer_streaming.py", "conformer_streaming_chunked")]


@pytest.mark.parametrize("model, network", OTHER_NETWORKS)
@pytest.mark.parametrize("hoisting", HOISTING)
def test_other_network_verifies(verify, model, network, hoisting):
    proc = verify(EXAMPLES / model, "--seed", "1", f"--{hoisting}", "--network", network, *OPTIONS.get(model, []))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")


def test_examples_cover_the_seed_models():
    assert {"elman.py", "lstm.py", "gru.py", "stacked_rnn.py"} <= set(MODELS)


@pytest.mark.parametrize("model, hoisting", _cases(["beam_search.py", "librispeech_2018.py", "conformer_aed.py"]))
def test_example_searches_alike(verify, model, hoisting):
    """Models with `choice` also verify when searching: best labels, lengths and scores."""
    network = example_network(EXAMPLES / model)
    options = ["--network", network] if network else []
    proc = verify(EXAMPLES / model, "--search", "--seed", "1", f"--{hoisting}", *options)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok")
    rows = re.findall(r"(\w+)\s+eager vs (\w+)\s+max\|Δ\| = (\S+)", proc.stdout)
    assert {(o, b) for o, b, _ in rows} >= {("scores", "torch"), ("scores", "returnn")}
    assert all(float(d) <= 1e-4 for _, _, d in rows)

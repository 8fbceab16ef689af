"""Values of a searched decoder on all three backends: stacked values that do not depend on the chosen
labels (a state ignoring them, a step counter, the encoder frame an RNA-style step reads), which
RETURNN's search holds without the beam unless their stack reads the choice; and values after the
searched loop (a state read by two ops, an `if`, a `where`), which are training's outputs: a search
returns the stacked ones, and its networks compute nothing else. (Training verifies them in
tests/test_models.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, verify_in_process

from netc.compiler import compile_graph
from netc.ir.search import search_plan

MODELS = ROOT / "tests" / "models"
# each with a seed whose searches end at different steps (and some at their bound)
SEARCHED = {
    "search_state_ignores_label.py": "2",
    "search_counter_returned.py": "2",
    "search_rna_stacks_frame.py": "2",
    "search_state_after_loop.py": "5",
}


def _with_beam(directory: Path, model: str, beam: int) -> Path:
    text = (MODELS / model).read_text(encoding="utf-8")
    assert text.count("\nBEAM = ") == 1
    line = next(x for x in text.splitlines() if x.startswith("BEAM = "))
    path = directory / f"{Path(model).stem}_beam{beam}.py"
    path.write_text(text.replace(line, f"BEAM = {beam}"), encoding="utf-8")
    return path


def _ok(proc, *names: str) -> None:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("verify: ok"), proc.stdout
    for name in names:
        assert f"{name:<16} eager vs returnn" in proc.stdout and f"{name:<16} eager vs torch" in proc.stdout


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("model", SEARCHED)
def test_searched_decoder_values(tmp_path, model, beam):
    proc = verify_in_process(_with_beam(tmp_path, model, beam), "--seed", SEARCHED[model], "--search")
    outputs = search_plan(compile_graph(str(MODELS / model))).outputs
    _ok(proc, *outputs, "scores")


@pytest.mark.parametrize("model", SEARCHED)
def test_searched_decoder_values_without_hoisting(model):
    """What hoisting leaves in the loop must not change which stacks read the choice."""
    _ok(verify_in_process(MODELS / model, "--seed", SEARCHED[model], "--search", "--no-hoist"), "scores")


def test_a_search_computes_only_what_it_returns():
    """The search graph keeps the outputs stacked in the loop, no value after it and no loss."""
    g = compile_graph(str(MODELS / "search_state_after_loop.py"))
    assert [o.name for o in g.outputs] == ["out", "states", "last", "picked", "kept"]
    assert [o.name for o in g.search.outputs] == ["out", "states"] and not g.search.losses
    assert not search_plan(g).loop.lasts and not any(c.out for c in search_plan(g).loop.carries)
    beam = compile_graph(str(ROOT / "examples" / "beam_search.py"))
    assert [o.name for o in beam.losses] == ["ce"] and not beam.search.losses

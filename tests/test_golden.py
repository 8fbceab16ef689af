"""Emitted code for every example is pinned; a change to it must be regenerated on purpose."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES, ROOT
from regen_golden import emitted, example_networks, golden_path

from netc.compiler import TARGETS, compile_graph

MODELS = sorted(EXAMPLES.glob("*.py"))
NETWORKS = example_networks()


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize(("model", "network"), NETWORKS, ids=[f"{m.stem}.{n}" if n else m.stem for m, n in NETWORKS])
def test_emitted_code_matches_golden(model, network, target):
    path = golden_path(model, target, network)
    assert path.exists(), f"no golden file {path.name}: run `.venv/bin/python tests/regen_golden.py`"
    got = emitted(target, compile_graph(str(model.relative_to(ROOT)), network=network))
    assert got == path.read_text(encoding="utf-8"), (
        f"{path.name} is stale: run `.venv/bin/python tests/regen_golden.py` and review the diff"
    )


def test_no_golden_file_without_its_example():
    stems = {m.stem for m in MODELS}
    for path in (ROOT / "tests" / "golden").glob("*.golden"):
        assert path.name.split(".")[0] in stems, f"{path.name} belongs to no example; delete it"

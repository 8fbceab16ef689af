"""Regression cases: every crash the fuzzer found, each a model file with its expected outcome.

The cases and their expectations are in tests/fuzz_cases/cases.txt. They run in the fuzzer's
worker processes (time and memory limits, a compile some frames deep), so a case that crashes
the interpreter fails on its own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fuzz_pool import run_all

CASES = Path(__file__).with_name("fuzz_cases")


def _expectations() -> dict[str, str]:
    out = {}
    for line in (CASES / "cases.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, expected = (part.strip() for part in line.split("|", 1))
            out[name] = expected
    return out


EXPECTED = _expectations()


@pytest.fixture(scope="module")
def outcomes() -> dict[str, dict]:
    results = run_all([str(CASES / name) for name in EXPECTED])
    return {Path(p).name: r for p, r in results.items()}


def test_every_case_file_has_an_expectation():
    assert sorted(p.name for p in CASES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_case(outcomes, name):
    expected, got = EXPECTED[name], outcomes[name]
    if expected == "ok":
        assert got["outcome"] == "ok", got
        return
    m = re.fullmatch(r"error (\d+:\d+|-) (.+)", expected)
    assert m, f"bad expectation for {name}: {expected}"
    where, text = m.groups()
    assert got["outcome"] == "error", got
    prefix = ": error: " if where == "-" else f":{where}: error: "
    assert got["detail"].startswith(prefix), got
    assert text in got["detail"], got

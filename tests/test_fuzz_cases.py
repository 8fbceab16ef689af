"""Regression cases: every crash the fuzzer found, each a model file with its expected outcome.

The cases and their expectations are in tests/fuzz_cases/cases.txt. They run in the fuzzer's
worker processes (time and memory limits, a compile some frames deep), so a case that crashes
the interpreter fails on its own.
"""

from __future__ import annotations

import re
from pathlib import Path

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


def _mismatch(expected: str, got: dict) -> str | None:
    """What is wrong with an outcome, or None."""
    if expected == "ok":
        return None if got["outcome"] == "ok" else f"expected ok, got {got}"
    m = re.fullmatch(r"error (\d+:\d+|-) (.+)", expected)
    if m is None:
        return f"bad expectation {expected!r}"
    where, text = m.groups()
    prefix = ": error: " if where == "-" else f":{where}: error: "
    ok = got["outcome"] == "error" and got["detail"].startswith(prefix) and text in got["detail"]
    return None if ok else f"expected {expected!r}, got {got}"


def test_every_case_file_has_an_expectation():
    assert sorted(p.name for p in CASES.glob("*.py")) == sorted(EXPECTED)


def test_cases():
    """One test for all cases (a fixture shared by parametrized tests would run once per
    xdist worker); the message lists every case that fails."""
    results = run_all([str(CASES / name) for name in EXPECTED])
    outcomes = {Path(p).name: r for p, r in results.items()}
    wrong = {name: _mismatch(expected, outcomes[name]) for name, expected in EXPECTED.items()}
    wrong = {name: why for name, why in wrong.items() if why}
    assert not wrong, "\n".join(f"{name}: {why}" for name, why in sorted(wrong.items()))

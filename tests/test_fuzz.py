"""A seeded mutation fuzzer over examples/ and tests/models/.

Every mutant goes through the real pipeline for both targets (parse, passes, `emit_returnn`,
`emit_torch`) in a worker process with a time and a memory limit. It must end in a compile
whose emitted files parse or in a located CompileError; anything else (a traceback, a
segfault, a hang, an emitted file that is not Python) is a crash. A sample of the mutants
also goes through the real `netc` CLI.

CI runs NETC_FUZZ_MUTANTS=300 mutants (the default); a deeper run:
    NETC_FUZZ_MUTANTS=1600 .venv/bin/python -m pytest tests/test_fuzz.py -s
Crashing mutants are written to NETC_FUZZ_SAVE (a directory) when it is set; keep each as a
regression case in tests/fuzz_cases/ (see test_fuzz_cases.py).
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import EXAMPLES
from fuzz_mutate import Mutant, mutant
from fuzz_pool import run_all

MUTANTS = int(os.environ.get("NETC_FUZZ_MUTANTS", "300"))
SEED = int(os.environ.get("NETC_FUZZ_SEED", "0"))
WORKERS = int(os.environ.get("NETC_FUZZ_WORKERS", "2"))
CLI_SAMPLE = 12  # mutants also run through `netc check`


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory) -> dict[str, tuple[Mutant, dict]]:
    """Each mutant file's path → the mutant and its outcome."""
    folder = tmp_path_factory.mktemp("fuzz")
    mutants = {}
    for i in range(MUTANTS):
        m = mutant(SEED, i)
        path = folder / f"{m.name}.py"
        path.write_bytes(m.data)
        mutants[str(path)] = m
    start = time.monotonic()
    results = run_all(list(mutants), workers=WORKERS)
    counts = Counter(r["outcome"] for r in results.values())
    print(f"\nfuzz: {MUTANTS} mutants (seed {SEED}) in {time.monotonic() - start:.1f} s: {dict(counts)}")
    return {p: (mutants[p], results[p]) for p in mutants}


def test_mutants_compile_or_fail_with_a_located_error(fuzzed):
    crashes = [(m, r) for m, r in fuzzed.values() if r["outcome"] == "crash"]
    save = os.environ.get("NETC_FUZZ_SAVE")
    if save:
        Path(save).mkdir(parents=True, exist_ok=True)
        for m, _ in crashes:
            (Path(save) / f"{m.name}.py").write_bytes(m.data)
    report = "\n".join(f"{m.describe()}:\n  {r['detail']}" for m, r in crashes)
    assert not crashes, f"{len(crashes)} of {len(fuzzed)} mutants crashed:\n{report}"
    # the mutants exercise both sides: some still compile, most are errors
    counts = Counter(r["outcome"] for _, r in fuzzed.values())
    assert counts["ok"] >= len(fuzzed) // 20 and counts["error"] >= len(fuzzed) // 4, counts


def test_mutant_sample_through_the_cli(fuzzed, netc):
    """`netc check` (every target) agrees with the worker: exit 0, or exit 1 with a located error."""
    paths = sorted(fuzzed, key=lambda p: fuzzed[p][0].index)
    sample = paths[:: max(1, len(paths) // CLI_SAMPLE)][:CLI_SAMPLE]
    with ThreadPoolExecutor(WORKERS) as pool:
        procs = list(pool.map(lambda p: netc("check", p), sample))
    for path, proc in zip(sample, procs):
        m, result = fuzzed[path]
        assert "Traceback" not in proc.stderr, m.describe()
        if result["outcome"] == "ok":
            assert proc.returncode == 0, (m.describe(), proc.stderr)
        else:
            assert proc.returncode == 1, (m.describe(), proc.stderr)
            head = proc.stderr.splitlines()[0]
            assert re.match(rf"{re.escape(path)}(:\d+:\d+)?: error: ", head), (m.describe(), head)
            assert head.endswith(result["detail"]), (m.describe(), head, result)


def test_mutants_are_deterministic():
    assert [mutant(SEED, i).data for i in range(20)] == [mutant(SEED, i).data for i in range(20)]
    assert len({mutant(SEED, i).data for i in range(20)}) > 15


def test_a_worker_that_does_not_answer_is_replaced():
    """Over the time limit: recorded as a crash, the worker killed, the next file still runs."""
    paths = [str(EXAMPLES / "elman.py"), str(EXAMPLES / "gru.py")]
    timed_out = run_all(paths, workers=1, timeout=0.001)
    assert all(r["outcome"] == "crash" and "no answer" in r["detail"] for r in timed_out.values()), timed_out
    assert {r["outcome"] for r in run_all(paths, workers=1).values()} == {"ok"}

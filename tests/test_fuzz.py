"""A seeded mutation fuzzer over examples/ and tests/models/.

Every mutant goes through the real pipeline for both targets (parse, passes, `emit_returnn`,
`emit_torch`) in a worker process with a time and a memory limit. It must end in a compile
whose emitted files parse or in a located CompileError; anything else (a traceback, a
segfault, a hang, an emitted file that is not Python) is a crash. A sample of the mutants
also goes through the real `netc` CLI.

CI runs NETC_FUZZ_MUTANTS=300 mutants (the default) of seed NETC_FUZZ_SEED=0; a deeper run:
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

from conftest import EXAMPLES
from fuzz_mutate import mutant
from fuzz_pool import run_all

MUTANTS = int(os.environ.get("NETC_FUZZ_MUTANTS", "300"))
SEED = int(os.environ.get("NETC_FUZZ_SEED", "0"))
WORKERS = int(os.environ.get("NETC_FUZZ_WORKERS", "2"))
CLI_SAMPLE = 12  # mutants also run through `netc check`


def test_mutants_compile_or_fail_with_a_located_error(tmp_path, netc):
    """One test (a module fixture shared by two tests would run once per xdist worker)."""
    mutants = {}
    for i in range(MUTANTS):
        m = mutant(SEED, i)
        path = tmp_path / f"{m.name}.py"
        path.write_bytes(m.data)
        mutants[str(path)] = m
    start = time.monotonic()
    results = run_all(list(mutants), workers=WORKERS)
    counts = Counter(r["outcome"] for r in results.values())
    print(f"\nfuzz: {MUTANTS} mutants (seed {SEED}) in {time.monotonic() - start:.1f} s: {dict(counts)}")

    crashes = [(mutants[p], r) for p, r in results.items() if r["outcome"] == "crash"]
    save = os.environ.get("NETC_FUZZ_SAVE")
    if save:
        Path(save).mkdir(parents=True, exist_ok=True)
        for m, _ in crashes:
            (Path(save) / f"{m.name}.py").write_bytes(m.data)
    report = "\n".join(f"{m.describe()}:\n  {r['detail']}" for m, r in crashes)
    assert not crashes, f"{len(crashes)} of {MUTANTS} mutants crashed:\n{report}"
    # the mutants exercise both sides: some still compile, most are errors
    assert counts["ok"] >= MUTANTS // 20 and counts["error"] >= MUTANTS // 4, counts

    # `netc check` (every target) agrees with the worker: exit 0, or exit 1 with a located error
    sample = list(mutants)[:: max(1, MUTANTS // CLI_SAMPLE)][:CLI_SAMPLE]
    with ThreadPoolExecutor(WORKERS) as pool:
        procs = list(pool.map(lambda p: netc("check", p), sample))
    for path, proc in zip(sample, procs):
        m, result = mutants[path], results[path]
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

"""`netc check` on a generated project of many models: the process pool and the content-hash cache.

The project: copies of the example models (each made distinct by a comment, so each has its
own cache entry), declared by one glob in pyproject.toml, both targets each. Every row runs
the real `netc` command in a fresh process, as CI would; the median of `--runs` runs.

    .venv/bin/python bench/bench_check.py [--models 200] [--runs 3] [--jobs 2]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NETC = str(Path(sys.executable).parent / "netc")
PYPROJECT = """\
[project]
name = "bench"

[[tool.netc.models]]
source = "models/*.py"
returnn = "gen/{stem}_config.py"
torch = "gen/{stem}_torch.py"
"""


def make_project(root: Path, n: int) -> list[Path]:
    examples = sorted((ROOT / "examples").glob("*.py"))
    (root / "models").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    models = []
    for k in range(n):
        src = examples[k % len(examples)]
        dst = root / "models" / f"m{k:03d}_{src.stem}.py"
        dst.write_text(src.read_text() + f"\n# variant {k}\n")
        models.append(dst)
    return models


def netc(root: Path, *args: str) -> None:
    proc = subprocess.run([NETC, *args], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"netc {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


def timed(runs: int, fn, before=None) -> float:
    """Median wall time of `fn` over `runs` runs; `before` (untimed) runs ahead of each."""
    times = []
    for _ in range(runs):
        if before:
            before()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2, help="workers of the pooled rows")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="netc_bench_check_"))
    try:
        models = make_project(root, args.models)
        netc(root, "compile", "--all", "--no-cache")
        edits = iter(range(10**6))

        def edit_one() -> None:  # a new source for one model (a comment: its files stay current): one cache miss
            m = models[0]
            m.write_text(m.read_text() + f"# edit {next(edits)}\n")

        def one_process_per_model() -> None:
            for m in models:
                gen = root / "gen" / m.stem
                netc(root, "check", str(m), "--returnn", f"{gen}_config.py", "--torch", f"{gen}_torch.py")

        n, j = args.models, args.jobs

        def check(*opts: str):
            return lambda: netc(root, "check", *opts)

        # (what, how often, run, untimed set-up); the first row is one process per model, as
        # `netc check MODEL` did before projects: it takes long, so it runs once
        rows = [
            (f"{n} × `netc check MODEL --returnn F --torch F`", 1, one_process_per_model, None),
            ("`netc check -j 1 --no-cache` (one process, serial)", args.runs, check("-j", "1", "--no-cache"), None),
            (f"`netc check -j {j} --no-cache` (a pool of {j})", args.runs, check("-j", str(j), "--no-cache"), None),
            ("`netc check`, cache warm, nothing changed", args.runs, check(), None),
            ("`netc check`, cache warm, one source changed", args.runs, check(), edit_one),
            (
                f"`netc compile --all -j {j} --no-cache`",
                args.runs,
                lambda: netc(root, "compile", "--all", "-j", str(j), "--no-cache"),
                None,
            ),
        ]
        netc(root, "check")  # fill the cache
        print(f"{n} models ({2 * n} generated files); medians\n")
        print("| command | runs | seconds | per model (ms) |")
        print("|---|---:|---:|---:|")
        for name, runs, fn, before in rows:
            t = timed(runs, fn, before)
            print(f"| {name} | {runs} | {t:.2f} | {1000 * t / n:.1f} |", flush=True)
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()

"""`python -m tests.diffgen --n 1000 --seed-start 0 [--features a,b] [--green] [--shrink DIR] [--jobs 2]`

Generates and checks programs (each on eager, torch and RETURNN, every option set), prints a
table of outcomes and failure signatures with example seeds; `--shrink DIR` writes a shrunk
model per failure signature (the first seed that showed it) into DIR.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main(argv: list[str] | None = None) -> int:
    from .gen import FEATURES, GREEN
    from .run import run_seeds

    ap = argparse.ArgumentParser(prog="python -m tests.diffgen", description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed-start", type=int, default=0)
    ap.add_argument("--features", help="comma-separated feature names (default: all)")
    ap.add_argument("--green", action="store_true", help="only the features CI uses (not known to fail)")
    ap.add_argument("--shrink", metavar="DIR", help="write a shrunk model per failure signature here")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--time-limit", type=int, default=300, help="seconds per program")
    a = ap.parse_args(argv)
    features = set(FEATURES)
    if a.features:
        features = {f.strip() for f in a.features.split(",") if f.strip()}
        unknown = features - FEATURES
        if unknown:
            ap.error(f"unknown features: {sorted(unknown)}")
    if a.green:
        features &= GREEN
    seeds = list(range(a.seed_start, a.seed_start + a.n))
    start = time.monotonic()
    if a.jobs > 1:
        import multiprocessing

        chunks = [seeds[i :: a.jobs] for i in range(a.jobs)]
        with ProcessPoolExecutor(a.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            reports = [r for part in pool.map(run_seeds, [(c, features, a.time_limit) for c in chunks]) for r in part]
    else:
        reports = run_seeds((seeds, features, a.time_limit))
    reports.sort(key=lambda r: r.seed)
    elapsed = time.monotonic() - start
    outcomes = Counter(r.outcome for r in reports)
    by_sig: dict[str, list[int]] = defaultdict(list)
    for r in reports:
        for s in r.signatures:
            by_sig[s].append(r.seed)
    print(
        f"{len(reports)} programs (seeds {seeds[0]}..{seeds[-1]}) in {elapsed:.0f} s "
        f"({elapsed / max(1, len(reports)):.1f} s each, {a.jobs} job(s))"
    )
    for k in ("agree", "refused", "mismatch", "traceback", "timeout"):
        print(f"  {k:<10} {outcomes.get(k, 0)}")
    summary(reports)
    print("failure signatures (count, seeds):")
    for s, ss in sorted(by_sig.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(ss):>4}  {s}   seeds {ss[:8]}")
    if a.shrink:
        from .gen import generate
        from .shrink import shrink

        os.makedirs(a.shrink, exist_ok=True)
        for i, (s, ss) in enumerate(sorted(by_sig.items(), key=lambda kv: -len(kv[1]))):
            if s.startswith("refused"):
                continue
            small = shrink(generate(ss[0], features), s)
            path = os.path.join(a.shrink, f"sig{i:02d}_seed{ss[0]}.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write(f"# diffgen seed {ss[0]} ({len(ss)} of {len(reports)} programs): {s}\n{small.source}")
            print(f"shrunk: {path} ({small.source.count(chr(10))} lines)")
    return 0


def summary(reports: list) -> None:
    """Training and beam search apart (each program trains; those with `choice` also search):
    agree, refused with a documented limitation, refused otherwise, mismatch, traceback, timeout;
    then the share that agrees (a documented refusal counts as agreeing) over both."""
    kinds = ("agree", "documented", "refused", "mismatch", "traceback", "timeout")
    total: Counter = Counter()
    for mode, search in (("training", False), ("search", True)):
        rs = [r for r in reports if r.searched or not search]
        got = Counter(r.mode_outcome(search) for r in rs)
        total.update(got)
        print(f"  {mode:<9} {len(rs):>5} programs: " + ", ".join(f"{k} {got.get(k, 0)}" for k in kinds))
    runs = sum(total.values())
    ok = total["agree"] + total["documented"]
    print(
        f"  training and search: {ok} of {runs} runs agree ({100 * ok / max(1, runs):.2f}%, documented "
        f"refusals included), {total['mismatch']} mismatches, {total['traceback']} tracebacks, "
        f"{total['refused']} other refusals, {total['timeout']} timeouts"
    )


if __name__ == "__main__":
    sys.exit(main())

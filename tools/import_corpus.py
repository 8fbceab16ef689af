"""`netc import` over a corpus of RETURNN configs (docs/import.md, "The public corpus").

    python tools/import_corpus.py CORPUS_DIR [-j 2] [--timeout 300] [--out DIR] [--stages import,verify,match]

Finds every net-dict config under CORPUS_DIR (tools/corpus_find.py), imports each (the config run
as RETURNN runs it, else `--no-exec`, as `netc import` falls back by itself), builds the imported
model in RETURNN and runs `netc verify` on it (training; `--search` too where it decodes), and runs
the original config in RETURNN against the imported model ("matched", tools/corpus_match.py).
Worker processes each take config after config (TensorFlow is imported once per worker); a config
that runs past `--timeout` has its worker ended and another started. Results go to
DIR/results.jsonl (one line per config; `--resume` keeps those already there) and the table of
counts per top-level folder to DIR/table.md and stdout."""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpus_find import find_configs  # noqa: E402

from netc import tf_quiet  # noqa: E402

_MARK = "@@corpus@@ "
_PARTIAL = "@@partial@@ "
STAGES = ("import", "verify", "match")


_PAGE = os.sysconf("SC_PAGE_SIZE")


def machine_memory() -> int:
    return os.sysconf("SC_PHYS_PAGES") * _PAGE


class Worker:
    """A `corpus_worker.py` process fed one config at a time on stdin."""

    def __init__(self, args: argparse.Namespace):
        cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_worker.py")]
        env = dict(tf_quiet.env(), CUDA_VISIBLE_DEVICES="")  # oneDNN off: RETURNN's numbers as netc verify's
        log = open(os.path.join(args.out, "workers.log"), "a")  # noqa: SIM115 - the worker's own output
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True
        )
        log.close()
        self.buf = b""
        self.job: dict | None = None
        self.partial: dict | None = None  # the job's record before the stage now running
        self.deadline = 0.0

    def send(self, job: dict, timeout: float) -> None:
        self.job, self.partial, self.deadline = job, None, time.monotonic() + timeout
        self.proc.stdin.write((json.dumps(job) + "\n").encode())
        self.proc.stdin.flush()

    def lines(self) -> list[str]:
        data = os.read(self.proc.stdout.fileno(), 1 << 16)
        if not data:
            raise EOFError
        self.buf += data
        *done, self.buf = self.buf.split(b"\n")
        return [d.decode(errors="replace") for d in done]

    def memory(self) -> int:
        """Resident bytes of the worker's process group (it and what it started)."""
        total = 0
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == self.proc.pid:  # its process group
                total += int(fields[21]) * _PAGE
        return total

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def run(args: argparse.Namespace) -> list[dict]:
    os.makedirs(args.out, exist_ok=True)
    results_path = os.path.join(args.out, "results.jsonl")
    done: dict[str, dict] = {}
    if args.resume and os.path.exists(results_path):
        done = {r["config"]: r for r in read_results(args.out)}
    configs = find_configs(args.corpus)
    if args.only:
        configs = [c for c in configs if any(s in c for s in args.only)]
    if args.list:
        with open(args.list) as f:
            listed = [x.strip() for x in f if x.strip()]
        known = set(configs)
        configs = [c for c in listed if c in known]  # in the list's order (e.g. smallest first)
    if args.every > 1:
        configs = configs[:: args.every]
    if args.limit:
        configs = configs[: args.limit]
    todo = [c for c in configs if c not in done]
    print(f"{len(configs)} net-dict configs, {len(todo)} to run", file=sys.stderr)
    out = open(results_path, "a" if args.resume else "w")  # noqa: SIM115
    if not args.resume:
        done = {}
    sel = selectors.DefaultSelector()
    workers: list[Worker] = []
    queue = list(todo)
    n_done = 0

    def start(w: Worker | None = None) -> Worker:
        if w is not None:
            sel.unregister(w.proc.stdout)
            w.kill()
            workers.remove(w)
        nw = Worker(args)
        sel.register(nw.proc.stdout, selectors.EVENT_READ, nw)
        workers.append(nw)
        return nw

    def finish(w: Worker, record: dict) -> None:
        nonlocal n_done
        n_done += 1
        done[record["config"]] = record
        out.write(json.dumps(record) + "\n")
        out.flush()
        print(f"[{n_done}/{len(todo)}] {record['config']}: {summary(record)}", file=sys.stderr)
        w.job = None

    def give(w: Worker) -> None:
        if queue:
            rel = queue.pop(0)
            job = {"config": rel, "path": os.path.join(args.corpus, rel), "stages": args.stages, "out": args.out}
            w.send(job, args.timeout)

    # one worker past its share of the machine would swap every other one (a large Transformer's
    # verify grew to 21 GB): it is stopped, and the stage it was in is recorded as stopped for memory
    limit = int(args.max_memory * 2**30) if args.max_memory else int(0.8 * machine_memory() / max(1, args.jobs))
    for _ in range(min(args.jobs, len(queue))):
        give(start())
    while any(w.job for w in workers):
        now = time.monotonic()
        wait = min(2.0, max(0.1, min(w.deadline for w in workers if w.job) - now))
        for key, _ in sel.select(timeout=wait):
            w = key.data
            try:
                lines = w.lines()
            except EOFError:
                if w.job:
                    finish(w, stopped(w, "died", "worker died (out of memory or a crash in native code)"))
                give(start(w))
                continue
            for line in lines:
                if line.startswith(_PARTIAL) and w.job:
                    w.partial = json.loads(line[len(_PARTIAL) :])
                elif line.startswith(_MARK) and w.job:
                    finish(w, json.loads(line[len(_MARK) :]))
                    # what one config's graphs left behind stays with the worker: the next config
                    # starts in a fresh one where that is half the bound
                    give(start(w) if queue and w.memory() > limit // 2 else w)
                    break  # a fresh worker's lines come from its own pipe
        now = time.monotonic()
        for w in list(workers):
            if w.job and now > w.deadline:
                finish(w, stopped(w, "timeout", f"timeout ({args.timeout:.0f} s)"))
                give(start(w))
            elif w.job and (used := w.memory()) > limit:
                why = f"used {used / 2**30:.1f} GB, over the bound of {limit / 2**30:.1f} GB (--max-memory)"
                finish(w, stopped(w, "memory", why))
                give(start(w))
    for w in workers:
        w.kill()
    out.close()
    records = [done[c] for c in configs if c in done]
    table = render_table(records, args.stages)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table)
    print(table)
    return records


def stopped(w: Worker, status: str, why: str) -> dict:
    """The record of a job whose worker was stopped: the stage it was in is `status` (the import's
    outcome kept when it had one), else the job is an error."""
    if w.partial is not None:
        rec = dict(w.partial)
        rec[rec.pop("stage")] = {"status": status, "cause": why}
        return rec
    job = w.job
    return {"config": job["config"], "folder": job["config"].split("/")[0], "outcome": "error", "cause": why}


def summary(r: dict) -> str:
    parts = [r["outcome"]]
    if r.get("cause"):
        parts.append(r["cause"])
    for s in ("verify", "match"):
        if s in r:
            parts.append(f"{s}: {r[s] if isinstance(r[s], str) else r[s].get('status')}")
    return "; ".join(parts)


def cause_of_invalid(r: dict) -> str:
    """Why RETURNN itself rejects a config, without its names and numbers."""
    why = r.get("invalid", "?").removeprefix("RETURNN rejects it: ").removeprefix("the installed RETURNN rejects ")
    return re.sub(r"\b\d+\b", "N", re.sub(r"'[^']*'|\([^)]*line \d+\)", "…", why))[:120]


def read_results(folder: str) -> list[dict]:
    """A run's `results.jsonl`: a record per config."""
    with open(os.path.join(folder, "results.jsonl")) as f:
        return [json.loads(x) for x in f if x.strip()]


def merged_records(out: str, merge: list[str]) -> list[dict]:
    """`out`'s results, each with the verify and match results of the runs in `merge` (later runs,
    such as verify batches over part of the corpus, win) for a config `out` imported too."""
    records = {r["config"]: r for r in read_results(out)}
    for folder in merge:
        for r in read_results(folder):
            base = records.get(r["config"])
            if base is None or base["outcome"] != "imported" or r["outcome"] != "imported":
                continue
            for s in ("verify", "match"):
                if isinstance(r.get(s), dict):
                    base[s] = r[s]
    return list(records.values())


def render_table(records: list[dict], stages) -> str:
    """Counts per top-level folder: configs, imported (of them by the `--no-exec` fallback),
    verified, matched, refused, errors; then the refusals and errors by cause."""
    rows: dict[str, Counter] = defaultdict(Counter)
    causes: Counter = Counter()
    for r in records:
        for key in (r["folder"], "**all**"):
            c = rows[key]
            c["configs"] += 1
            c[r["outcome"]] += 1
            if r["outcome"] == "imported" and r.get("load") == "no-exec":
                c["no-exec"] += 1
            for s in ("verify", "match"):
                if isinstance(r.get(s), dict) and r[s].get("status") == "ok":
                    c[s] += 1
            if isinstance(r.get("match"), dict) and r["match"].get("status") == "unbuildable":
                c["unbuildable"] += 1  # imported and verified; the original is not a config this RETURNN builds
        if r["outcome"] == "invalid":
            causes["not a config this RETURNN builds: " + cause_of_invalid(r)] += 1
        elif r["outcome"] != "imported":
            causes[r.get("cause", "?")] += 1
        for s in ("verify", "match"):
            if isinstance(r.get(s), dict) and r[s].get("status") == "unbuildable":
                causes["match: original not buildable here: " + cause_of_invalid({"invalid": r[s]["cause"]})] += 1
            elif isinstance(r.get(s), dict) and r[s].get("status") == "memory":
                causes[f"{s}: over the memory bound (--max-memory)"] += 1
            elif isinstance(r.get(s), dict) and r[s].get("status") not in ("ok", None):
                causes[f"{s}: {r[s].get('cause', r[s].get('status'))}"] += 1
    head = "| folder | configs | imported | (by --no-exec) | refused | not RETURNN's | errors |"
    line = "|---|---:|---:|---:|---:|---:|---:|"
    if "verify" in stages:
        head += " verified |"
        line += "---:|"
    if "match" in stages:
        head += " matched | original not buildable here |"
        line += "---:|---:|"
    out = [head, line]
    for key in sorted(rows, key=lambda k: (k == "**all**", k)):
        c = rows[key]
        row = f"| {key} | {c['configs']} | {c['imported']} | {c['no-exec']} | {c['refused']} | {c['invalid']} | {c['error']} |"
        if "verify" in stages:
            row += f" {c['verify']} |"
        if "match" in stages:
            row += f" {c['match']} | {c['unbuildable']} |"
        out.append(row)
    out += ["", "| cause | configs |", "|---|---:|"]
    out += [f"| {cause} | {n} |" for cause, n in causes.most_common()]
    return "\n".join(out) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("corpus", help="the corpus's folder (a checkout of rwth-i6/returnn-experiments)")
    p.add_argument("-j", "--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per config, all stages (default 300)")
    p.add_argument(
        "--out", default="corpus-report", help="results.jsonl, table.md, the models (default ./corpus-report)"
    )
    p.add_argument("--stages", default="import,verify,match", help="of import,verify,match (default all)")
    p.add_argument("--only", action="append", help="only configs whose path contains this (repeatable)")
    p.add_argument("--list", help="only the configs named in this file (one path a line), in its order")
    p.add_argument("--limit", type=int, default=0, help="only the first N configs")
    p.add_argument("--every", type=int, default=1, help="every N-th config only (a sample spread over the corpus)")
    p.add_argument("--max-memory", type=float, default=0, help="GB a worker may use (default 80%% of memory over -j)")
    p.add_argument("--resume", action="store_true", help="keep the results already in --out, run the rest")
    p.add_argument("--table", action="store_true", help="only write the table of --out's results")
    p.add_argument(
        "--merge",
        action="append",
        default=[],
        help="with --table: take the verify and match results of this run's folder too (repeatable; the last wins)",
    )
    args = p.parse_args()
    args.stages = [s for s in args.stages.split(",") if s]
    if bad := [s for s in args.stages if s not in STAGES]:
        p.error(f"unknown stages {bad}: of {','.join(STAGES)}")
    if args.table:
        print(render_table(merged_records(args.out, args.merge), args.stages))
        return
    run(args)


if __name__ == "__main__":
    main()

"""The layer classes a corpus uses, per config (tools/import_corpus.py records them; docs/import.md).

    python tools/corpus_layers.py REPORT_DIR [--min 5] [--brief]

`usage(network)` is what a worker records for a loaded config: each layer class (units and
subnetworks too) with the options its layers set. A config that does not load is scanned for its
`"class": "..."` strings instead (`scan`). The table: per class, the configs using it, whether
`netc import` has the class, the configs where a layer of that class was refused (any refusal, not
only the first), and the options most used."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter, defaultdict

_VALUED = ("loss", "activation", "kind", "mode", "unit", "axes", "axis", "padding")  # options counted by value too
_CLASS = re.compile(r"""["']class["']\s*:\s*["'](\w+)["']""")
_REFUSED = re.compile(r"error: layer `[^`]*` \((\w+)\): (.*)")


def usage(network: dict) -> dict[str, list[str]]:
    """Each layer class of a net dict (its rec units and subnetworks too) -> the options set on it."""
    out: dict[str, set[str]] = defaultdict(set)
    todo = [network]
    while todo:
        for d in todo.pop().values():
            if not isinstance(d, dict):
                continue
            cls = d.get("class")
            if isinstance(cls, str):
                out[cls] |= {k for k in d if k not in ("class", "from")}
                out[cls] |= {f"{k}={d[k]}" for k in _VALUED if isinstance(d.get(k), str)}
            for k in ("unit", "subnetwork"):
                if isinstance(d.get(k), dict):
                    todo.append(d[k])
    return {k: sorted(v) for k, v in sorted(out.items())}


def scan(path: str) -> dict[str, list[str]]:
    """The layer classes a config's text names (for one that does not load): options unknown."""
    from netc.importer.defaults import returnn_defaults
    from netc.importer.layers import CLASS_ALIASES

    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return {}
    known = set(returnn_defaults().get("__accepted__", {})) | set(CLASS_ALIASES)
    return {c: [] for c in sorted(set(_CLASS.findall(text)) & known)}


def status(cls: str) -> str:
    """Whether `netc import` has the class: "yes", "refused" (with the reason RETURNN's semantics
    cannot be expressed: netc.importer.layers._NOT_NETC), or "no"."""
    from netc.importer.layers import _NOT_NETC, CLASS_ALIASES, Importer

    if cls in _NOT_NETC:
        return f"refused: {_NOT_NETC[cls]}"
    return "yes" if hasattr(Importer, f"_l_{cls}") or cls in CLASS_ALIASES else "no"


def render(records: list[dict], minimum: int, brief: bool = False) -> str:
    uses: Counter = Counter()
    scanned: Counter = Counter()
    refused: Counter = Counter()
    options: dict[str, Counter] = defaultdict(Counter)
    for r in records:
        layers = r.get("layers") or {}
        for cls, opts in layers.items():
            uses[cls] += 1
            scanned[cls] += bool(r.get("layers_scanned"))
            options[cls].update(opts)
        errors = r.get("errors") or ([r["error"]] if r.get("error") else [])
        refused.update({m.group(1) for e in errors if (m := _REFUSED.search(e))})
    out = [f"{len(records)} configs; a class is counted once per config (its units and subnetworks too).", ""]
    if brief:  # the table of docs/import.md
        out += ["| class | configs | netc import | a layer of it refused in |", "|---|---:|---|---:|"]
    else:
        out += [
            "| class | configs | (of them scanned) | netc import | refused in | options (configs) |",
            "|---|---:|---:|---|---:|---|",
        ]
    for cls, n in uses.most_common():
        if n < minimum:
            break
        if brief:
            out.append(f"| `{cls}` | {n} | {status(cls)} | {refused[cls]} |")
            continue
        opts = ", ".join(f"{k} {c}" for k, c in options[cls].most_common(8))
        out.append(f"| {cls} | {n} | {scanned[cls]} | {status(cls)} | {refused[cls]} | {opts} |")
    rare = [f"{c} ({n})" for c, n in sorted(uses.items()) if n < minimum]
    if rare:
        out += ["", f"Used by fewer than {minimum} configs: " + ", ".join(rare)]
    return "\n".join(out) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("report", help="an --out folder of tools/import_corpus.py")
    p.add_argument("--min", type=int, default=5, help="list classes used by at least this many configs (default 5)")
    p.add_argument("--brief", action="store_true", help="without the options (the table of docs/import.md)")
    args = p.parse_args()
    with open(os.path.join(args.report, "results.jsonl")) as f:
        records = [json.loads(x) for x in f]
    sys.stdout.write(render(records, args.min, args.brief))


if __name__ == "__main__":
    main()

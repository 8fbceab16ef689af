"""`netc check` reports: text for people, JSON for tools, GitHub Actions annotations for CI.

Each renderer returns (stdout, stderr) text; nothing here decides what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from netc.check import ModelCheck, Problem

TEXT_DIFF_LINES = 200  # a longer diff is cut in text output (JSON has it whole)


def summary(checks: list[ModelCheck]) -> dict[str, int]:
    count = {s: sum(mc.status == s for mc in checks) for s in ("ok", "stale", "error")}
    return {"models": len(checks), **count, "cached": sum(mc.cached for mc in checks)}


def summary_line(checks: list[ModelCheck]) -> str:
    s = summary(checks)
    return (
        f"netc check: {s['models']} model{'s' * (s['models'] != 1)}: {s['ok']} ok, {s['stale']} stale, "
        f"{s['error']} with errors ({s['cached']} compiled from the cache)"
    )


def _cut(diff: str) -> str:
    lines = diff.splitlines(keepends=True)
    if len(lines) <= TEXT_DIFF_LINES:
        return diff
    return "".join(lines[:TEXT_DIFF_LINES]) + f"... ({len(lines) - TEXT_DIFF_LINES} more diff lines)\n"


def _text_problem(p: Problem, verbose: bool = False) -> str:
    if p.kind == "compile":
        return p.detail + "\n"
    if p.kind == "construct":  # its detail is the framework's traceback
        return f"{p.file}: error: {p.message}\n" + (p.detail.rstrip() + "\n" if verbose and p.detail else "")
    return f"{p.file}: {p.message}\n{_cut(p.detail)}"  # stale, with its diff, or missing


def render_text(checks: list[ModelCheck], with_summary: bool = True, verbose: bool = False) -> tuple[str, str]:
    """`verbose`: a construct failure with its traceback."""
    out, err = [], []
    for mc in checks:
        if mc.status == "ok":
            built = [f"{t.target} constructed" for t in mc.targets if t.construct == "ok"]
            out.append(f"{mc.source}: ok{' (' + ', '.join(built) + ')' if built else ''}\n")
        err += [_text_problem(p, verbose) for p in mc.problems]
    if with_summary:
        out.append(summary_line(checks) + "\n")
    return "".join(out), "".join(err)


def render_json(checks: list[ModelCheck]) -> tuple[str, str]:
    doc = {
        "ok": all(mc.status == "ok" for mc in checks),
        "summary": summary(checks),
        "models": [
            {
                "source": mc.source,
                "network": mc.network,
                "status": mc.status,
                "cached": mc.cached,
                "targets": [asdict(t) for t in mc.targets],
                "problems": [asdict(p) for p in mc.problems],
            }
            for mc in checks
        ],
    }
    return json.dumps(doc, indent=1) + "\n", ""


def _escape_data(s: str) -> str:
    """A workflow command's message: `%`, CR and LF are escaped."""
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(s: str) -> str:
    """A workflow command's property value: also `:` and `,` (they delimit properties)."""
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def github_annotation(p: Problem, title: str = "netc check") -> str:
    props = {"file": p.file, "line": p.line, "col": p.col, "endLine": p.end_line, "endColumn": p.end_col}
    props["title"] = title
    head = ",".join(f"{k}={_escape_property(str(v))}" for k, v in props.items() if v is not None)
    return f"::error {head}::{_escape_data(p.message)}\n"


def render_github(checks: list[ModelCheck]) -> tuple[str, str]:
    """One `::error` annotation per problem (shown on the file and line in a pull request);
    diffs and rendered errors in collapsed groups of the log."""
    out = []
    for mc in checks:
        for p in mc.problems:
            out.append(github_annotation(p))
            if p.detail:
                out.append(f"::group::{_escape_data(p.file)}: {p.kind}\n{p.detail.rstrip()}\n::endgroup::\n")
    text, _ = render_text(checks)  # the plain lines too, for the log
    return "".join(out) + text, ""


RENDERERS = {"text": render_text, "json": render_json, "github": render_github}

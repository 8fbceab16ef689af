"""`did you mean ...?` for names the user got nearly right (difflib's close matches)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`; did you mean `x`?` (empty when nothing is close), to append to an error message."""
    by_lower = {c.lower(): c for c in sorted(set(candidates), reverse=True)}  # `lienar` finds `Linear`
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.75)
    return f"; did you mean `{by_lower[close[0]]}`?" if close else ""


def listing(kind: str, names: Iterable[str]) -> str:
    """`(the file has NAME, NAME)`-style list of the available names, for an unknown one."""
    names = sorted(set(names))
    return f" (the {kind}: {', '.join(f'`{n}`' for n in names)})" if names else ""

"""Which files of a corpus are RETURNN configs with a net dict (tools/import_corpus.py)."""

from __future__ import annotations

import os
import re

_SHEBANG = re.compile(r"^#!.*(rnn\.py|returnn)")
_NETWORK = re.compile(r"^((get_)?network\s*=|def get_network\s*\(|def get_net_dict\s*\()", re.M)
_INPUTS = re.compile(r"\b(extern_data|num_outputs|num_inputs)\b")
_SKIP_DIRS = {".git", "__pycache__"}


def is_net_config(text: str) -> bool:
    """A RETURNN config with a net dict: JSON (`{` ... `"network"`, RETURNN's older form) or Python
    that RETURNN runs (`#!rnn.py`, or a `network`/`get_network` and its inputs), not a module a config
    imports (a `network = {...}` alone)."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return '"network"' in text
    first = stripped.split("\n", 1)[0]
    if not (_NETWORK.search(text) or re.search(r"\bnetwork\s*=", text)):
        return False
    return bool(_SHEBANG.match(first)) or bool(_NETWORK.search(text) and _INPUTS.search(text))


def find_configs(root: str) -> list[str]:
    """Every net-dict config under `root`, sorted, as paths relative to it."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for f in filenames:
            if not (f.endswith((".config", ".py", ".json")) or "." not in f):
                continue
            path = os.path.join(dirpath, f)
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read(2_000_000)
            except OSError:
                continue
            if is_net_config(text):
                out.append(os.path.relpath(path, root))
    return sorted(out)

"""`--base-config`: user RETURNN settings (training, datasets, ...) merged into an emitted config."""

from __future__ import annotations

from netc.errors import LINE_BREAK
from netc.naming import plain_text


def merge_base_config(emitted: str, base: str, base_name: str) -> str:
    """The base config's code runs first, then the emitted dims, `extern_data` and `network`,
    so netc's definitions of those win and every other setting comes from the base."""
    lines = LINE_BREAK.split(base.rstrip("\r\n"))  # not splitlines: \f or U+2028 may stand in a string
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    head, _, rest = emitted.partition("\n")
    merged = "\n".join([f"# --- settings from {plain_text(base_name)} ---", *lines, "# --- end of settings ---", ""])
    return f"{head}\n{merged}\n{rest}"

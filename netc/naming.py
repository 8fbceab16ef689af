"""Every name and string that reaches emitted code goes through this module.

- `py_str` is the one quoting function: user text inside emitted Python (string literals,
  and comments or docstrings when the text is not plain) is always its `repr`, which escapes
  quotes, newlines and control characters, so no user text can end a string or a comment.
- `identifier` is the one sanitiser: it makes an ASCII identifier of any hint. Emitted names
  never contain user text raw, and ASCII names are also valid TensorFlow scope names.
- `Namespace` hands out fresh sanitised names that avoid a target's reserved names.
"""

from __future__ import annotations

import builtins
import keyword
import re
import unicodedata

_PLAIN = re.compile(r"[A-Za-z0-9_.*+/ -]*")
_IDENT_CHAR = re.compile(r"[A-Za-z0-9_]")


def py_str(s: str) -> str:
    """A Python string literal for `s` (escapes quotes, backslashes, newlines, NUL, ...)."""
    return repr(str(s))


class Code(str):
    """A Python expression made by netc (e.g. a dim's variable), emitted as it is."""


def py_literal(v, indent: int | None = None) -> str:
    """Python source for plain data: dicts, lists, tuples, numbers, `Code`, and strings through
    `py_str`. With `indent`, the outermost dict and dicts that hold dicts are written one item
    a line at that depth (a network of layers); otherwise everything is on one line."""
    if isinstance(v, Code):
        return str(v)
    if isinstance(v, str):
        return py_str(v)
    if isinstance(v, dict):
        if indent is not None and (indent == 0 or any(isinstance(x, dict) for x in v.values())):
            pad = "    " * indent
            items = [f"{pad}    {py_literal(k)}: {py_literal(x, indent + 1)}," for k, x in v.items()]
            return "{\n" + "\n".join(items) + f"\n{pad}}}"
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(x, indent)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(py_literal(x, indent) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(py_literal(x, indent) for x in v) + ("," if len(v) == 1 else "") + ")"
    if v is None or isinstance(v, (bool, int, float)):
        return repr(v)
    raise TypeError(f"no Python literal for {type(v).__name__}")


def plain_text(s: str) -> str:
    """User text for a comment or docstring: as it is when harmless, else its quoted form."""
    return s if _PLAIN.fullmatch(s) else py_str(s)


def identifier(hint: str, default: str = "v", letter_first: bool = False) -> str:
    """An ASCII Python identifier made from `hint`: NFKC-normalised as Python reads names,
    other characters become `_`, non-ASCII letters `u<hex>` (so `α` and `β` stay apart).
    `letter_first`: start with a letter (TensorFlow root scope names may not start with `_`)."""
    out = []
    for ch in unicodedata.normalize("NFKC", hint):
        if _IDENT_CHAR.fullmatch(ch):
            out.append(ch)
        elif ch.isascii() or not ch.isalnum():
            out.append("_")
        else:
            out.append(f"u{ord(ch):x}")
    name = "".join(out)
    if letter_first:  # `_h` becomes `h` (a clash then gets a suffix), `2x` becomes `v2x`
        name = name.lstrip("_")
        if not name[:1].isalpha():
            name = f"{default}{name}"
    elif not name:
        name = default
    elif name[0].isdigit():
        name = f"_{name}"
    return f"{name}_" if keyword.iskeyword(name) or keyword.issoftkeyword(name) else name


def lens_name(dim: str) -> str:
    """The name lengths of a dynamic dim are passed and returned under: `<dim>_lens`, with one
    `_` for a leading run of them (`__t_lens` would be mangled: see `mangled`)."""
    name = identifier(f"{dim}_lens")
    return "_" + name.lstrip("_") if mangled(name) else name


def mangled(name: str) -> bool:
    """Whether Python renames `name` inside a class body (`__x` becomes `_M__x`): as an argument of
    the torch module's `forward` it could not be passed by keyword."""
    return name.startswith("__") and not name.endswith("__")


PYTHON_RESERVED = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))


class Namespace:
    """Fresh names: the sanitised hint itself if free, else `hint_2`, `hint_3`, ..."""

    def __init__(self, reserved=(), python: bool = True, letter_first: bool = False):
        self.used: set[str] = set(reserved)
        if python:
            self.used |= PYTHON_RESERVED
        self.letter_first = letter_first
        self._next: dict[str, int] = {}  # base -> last suffix tried: no quadratic search

    def fresh(self, hint: str | None, default: str = "v", sanitised: bool = False) -> str:
        """`sanitised`: the hint is already made of sanitised parts (e.g. a module path `cell/ff`)."""
        base = hint if sanitised and hint else identifier(hint or default, default, self.letter_first)
        name = base
        if name in self.used:
            n = self._next.get(base, 1)
            while name in self.used:
                n += 1
                name = f"{base}_{n}"
            self._next[base] = n
        self.used.add(name)
        return name

    def reserve(self, name: str) -> None:
        self.used.add(name)

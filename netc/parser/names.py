"""Deterministic module paths and helper scopes: sanitised segments, clashes get `_2`, `_3`.

Path segments become parameter names on both targets (`cell/ff/W` in TensorFlow, `cell.ff.W`
in torch), so each is an ASCII identifier starting with a letter (TensorFlow scope rules;
torch attributes such as `_modules` are internal).
"""

from __future__ import annotations

from netc.naming import Namespace, identifier


def segment(name: str) -> str:
    return identifier(name, "m", letter_first=True)


class Namer:
    def __init__(self) -> None:
        self.paths = Namespace(python=False)  # module paths such as `cell/ff`
        self.scopes: dict[tuple[str, str], int] = {}

    def module_path(self, scope: list[str], name: str) -> str:
        """A fresh path for a module called `name` in `scope` (segments already sanitised)."""
        return self.paths.fresh("/".join([*scope, segment(name)]), sanitised=True)

    def scope_name(self, scope: list[str], fname: str) -> str:
        """The scope segment of a helper function's body: `fname`, then `fname_2`, ..."""
        key = ("/".join(scope), segment(fname))
        n = self.scopes.get(key, 0) + 1
        self.scopes[key] = n
        return key[1] if n == 1 else f"{key[1]}_{n}"

"""Deterministic names for modules and helper scopes: the first use keeps the name, clashes get `_2`, `_3`."""

from __future__ import annotations

from netc.naming import Namespace


class Namer:
    def __init__(self) -> None:
        self.paths = Namespace(python=False)  # module paths such as `cell/ff`
        self.scopes: dict[tuple[str, str], int] = {}

    def module_path(self, path: str) -> str:
        return self.paths.fresh(path, identifier=False)

    def scope_name(self, parent: str, fname: str) -> str:
        n = self.scopes.get((parent, fname), 0) + 1
        self.scopes[(parent, fname)] = n
        return fname if n == 1 else f"{fname}_{n}"

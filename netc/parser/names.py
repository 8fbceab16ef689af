"""Deterministic names for modules and helper scopes: the first use keeps the name, clashes get `_2`, `_3`."""

from __future__ import annotations


class Namer:
    def __init__(self) -> None:
        self.taken: set[str] = set()
        self.scopes: dict[tuple[str, str], int] = {}

    def module_path(self, path: str) -> str:
        base, n = path, 1
        while path in self.taken:
            n += 1
            path = f"{base}_{n}"
        self.taken.add(path)
        return path

    def scope_name(self, parent: str, fname: str) -> str:
        n = self.scopes.get((parent, fname), 0) + 1
        self.scopes[(parent, fname)] = n
        return fname if n == 1 else f"{fname}_{n}"

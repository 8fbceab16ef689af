"""Fresh name spaces for emitted files: generated names never clash or shadow anything."""

from __future__ import annotations

import builtins
import keyword
import re


class Namespace:
    def __init__(self, reserved: set[str] | None = None, python: bool = True):
        self.used: set[str] = set(reserved or ())
        if python:
            self.used |= set(keyword.kwlist) | set(dir(builtins))

    def fresh(self, hint: str | None, default: str = "v", identifier: bool = True) -> str:
        """`hint` itself if free, else `hint_2`, `hint_3`, ...; made an identifier unless told not to."""
        base = hint or default
        if identifier:
            base = re.sub(r"\W", "_", base) or default
            if base[0].isdigit():
                base = f"_{base}"
        name, n = base, 1
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name

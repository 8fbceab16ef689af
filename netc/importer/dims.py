"""The imported model's dims: RETURNN's dim tags (by name), dims that `n_out` makes, and the
derived dims of `concat` (`a + b`) and CTC's `vocab + blank`.

RETURNN matches feature dims of old-style configs by size (a `combine` of two layers with
`n_out: 32` works), netc by identity: so every static dim of one size is one netc dim, the
first tag of that size (or the first layer that makes it) names it. Dynamic dims that a layer
requires to be equal (a frame-wise loss's target and output) are joined."""

from __future__ import annotations

import re
from dataclasses import dataclass

from netc.importer.load import DimTag
from netc.importer.syntax import Expr, binop, identifier, name

BATCH = "batch"


@dataclass
class Dim:
    key: str
    name: str
    size: int | None  # None: dynamic
    parts: tuple[str, ...] = ()  # a derived dim: the keys it is the sum of


# RETURNN's automatic tag names for `extern_data` entries without dim tags
_AUTO = [
    (re.compile(r"^time:var(?:-unk)?:(?:extern_data:)?(.+)$"), "time"),
    (re.compile(r"^feature:(?:extern_data:)?(.+)$"), "feat"),
    (re.compile(r"^(.+):sparse-dim$"), "vocab"),
]


class DimTable:
    def __init__(self, tags: dict[int, DimTag]):
        self.dims: dict[str, Dim] = {}
        self.order: list[str] = []  # declaration order
        self._parent: dict[str, str] = {}
        self._by_tag: dict[int, str] = {}
        self._by_size: dict[int, str] = {}
        self._names: set[str] = set()
        self._preferred: dict[int, tuple[int, str]] = {}
        self.tags = tags
        # dims of size 1 that a `reduce` with `keep_dims` leaves in a time axis' place: never
        # RETURNN's feature axis (it stays where it was: [B, 1, F] has F), so not one by size
        self.not_feature: set[str] = set()

    def kept_time(self) -> str:
        """The dim of size 1 in a time axis' place after a `reduce` with `keep_dims` (one for all)."""
        if not self.not_feature:
            self.not_feature.add(self.fresh("time_kept", 1))
        return next(iter(self.not_feature))

    # -- making dims

    def _new(self, dim_name: str, size: int | None, parts: tuple[str, ...] = ()) -> str:
        key = f"d{len(self.dims)}"
        self.dims[key] = Dim(key, dim_name, size, parts)
        self._parent[key] = key
        if not parts:
            self.order.append(key)
        return key

    def _fresh_name(self, base: str) -> str:
        n, i = base, 2
        while n in self._names:
            n, i = f"{base}_{i}", i + 1
        self._names.add(n)
        return n

    def tag(self, tag_id: int, input_key: str | None = None) -> str:
        """The netc dim of RETURNN dim tag `tag_id` (`input_key`: the extern_data entry it is
        from, which names RETURNN's automatic tags)."""
        if tag_id in self._by_tag:
            return self.find(self._by_tag[tag_id])
        t = self.tags[tag_id]
        if t.kind == "batch":
            return BATCH
        if t.kind == "static" and t.size in self._by_size:
            key = self._by_size[t.size]
        else:
            key = self._new(self._fresh_name(self._pretty(t.name, input_key)), t.size)
            if t.kind == "static":
                self._by_size[t.size] = key
        self._by_tag[tag_id] = key
        return key

    def _pretty(self, tag_name: str, input_key: str | None) -> str:
        for pattern, kind in _AUTO:
            m = pattern.match(tag_name)
            if m:
                owner = m.group(1)
                if kind == "vocab":
                    return "vocab" if "vocab" not in self._names else f"{owner}_vocab"
                return kind if owner == "data" else f"{owner}_{kind}"
        return tag_name or "dim"

    def prefer(self, tag_id: int, input_key: str) -> None:
        """An input's static tag names the dim of its size, even where a layer makes it first."""
        t = self.tags[tag_id]
        if t.kind == "static":
            self._preferred.setdefault(t.size, (tag_id, input_key))

    def static(self, size: int, hint: str) -> str:
        """The dim of size `size` (a layer's `n_out`), named after `hint` if new."""
        if size in self._by_size:
            return self.find(self._by_size[size])
        if size in self._preferred:
            return self.tag(*self._preferred[size])
        key = self._new(self._fresh_name(hint), size)
        self._by_size[size] = key
        return key

    def fresh(self, hint: str, size: int | None) -> str:
        """A new dim of its own (None: dynamic), named after `hint` (made unique)."""
        return self._new(self._fresh_name(hint), size)

    def derived(self, parts: list[str]) -> str:
        """`a + b + ...`, the dim `concat` makes."""
        parts = tuple(self.find(p) for p in parts)
        for d in self.dims.values():
            if d.parts == parts:
                return d.key
        size = sum(self.dims[p].size for p in parts)
        return self._new("+".join(self.dims[p].name for p in parts), size, parts)

    # -- joining dynamic dims

    def find(self, key: str) -> str:
        if key == BATCH:
            return key
        while self._parent[key] != key:
            key = self._parent[key]
        return key

    def join(self, a: str, b: str) -> None:
        a, b = self.find(a), self.find(b)
        if a != b:
            self._parent[b] = a

    # -- properties and syntax

    def size(self, key: str) -> int | None:
        return self.dims[self.find(key)].size

    def is_static(self, key: str) -> bool:
        return key != BATCH and self.size(key) is not None

    def is_dynamic(self, key: str) -> bool:
        return key != BATCH and self.size(key) is None

    def variables(self, taken: set[str]) -> dict[str, str]:
        """dim key -> its variable in the model (declared dims only), none of `taken`."""
        out, used = {}, set(taken)
        for key in self.order:
            if self.find(key) != key:
                continue
            var = identifier(self.dims[key].name)
            if var in used or var in ("batch", "network"):
                var += "_dim"
            base, i = var, 2
            while var in used:
                var, i = f"{base}_{i}", i + 1
            used.add(var)
            out[key] = var
        return out

    def expr(self, key: str, variables: dict[str, str]) -> Expr:
        key = self.find(key)
        if key == BATCH:
            return name("batch")
        d = self.dims[key]
        if not d.parts:
            return name(variables[key])
        e = self.expr(d.parts[0], variables)
        for p in d.parts[1:]:
            e = binop("+", e, self.expr(p, variables))
        return e

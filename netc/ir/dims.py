"""The dim table: every dim a graph uses, with the rules for derived dims and canonical order."""

from __future__ import annotations

import math

from netc.ir.model import DimDef
from netc.limits import MAX_INT
from netc.naming import lens_name

_GROUP = {"batch": 0, "dynamic": 1, "static": 2}


class DimError(Exception):
    """A dim rule failed; the caller attaches the source span."""


class DimTable:
    def __init__(self, dims: list[DimDef] | None = None):
        self.dims: dict[str, DimDef] = {}
        for d in dims or [DimDef(name="batch", kind="batch")]:
            self.dims[d.name] = d
        # while parsing: the dynamic dims whose lengths are known so far (the inputs', and those made
        # by loops and ops such as `max_pool`); None in a table of a finished graph, where all are
        self.known_lengths: set[str] | None = None if dims else set()
        # while parsing: dims that `empty` started, which states grow along (`cum_concat`)
        self.growing: set[str] = set()

    def __getitem__(self, name: str) -> DimDef:
        return self.dims[name]

    def declare(self, name: str, size: int | None) -> DimDef:
        """A user `Dim(name[, size])`; redeclaring with the same size gives the same dim."""
        kind = "dynamic" if size is None else "static"
        if name == "batch":
            raise DimError("`batch` is predefined; use `batch` instead of declaring it")
        if not name.strip():  # RETURNN would take it for no name; messages could not show it
            raise DimError(f"a dim needs a name; {name!r} is blank")
        old = self.dims.get(name)
        if old is not None:
            if old.size != size:
                raise DimError(f"dim `{name}` declared again with another size ({old.size} vs {size})")
            return old
        if kind == "dynamic":
            clash = self.lens_clash(name)
            if clash is not None:
                raise DimError(
                    f"dims `{clash}` and `{name}` would both pass their lengths as `{lens_name(name)}`; rename one"
                )
        d = DimDef(name=name, kind=kind, size=size)
        self.dims[name] = d
        return d

    def lens_clash(self, name: str) -> str | None:
        """Another dynamic dim whose lengths go by the same name `<dim>_lens` as `name`'s."""
        key = lens_name(name)
        return next((d.name for d in self.dims.values() if d.kind == "dynamic" and lens_name(d.name) == key), None)

    def fresh_dynamic(self, base: str) -> DimDef:
        """A new dynamic dim named `base` (or `base_2`, ...) for a loop that makes its own axis."""
        name, k = base, 1
        while name in self.dims or self.lens_clash(name) is not None:
            k += 1
            name = f"{base}_{k}"
        d = self.declare(name, None)
        self.lengths_known(name)
        return d

    def lengths_known(self, name: str) -> None:
        """From here on, `name`'s lengths are known (an input's dim, or a dim a loop made)."""
        if self.known_lengths is not None:
            self.known_lengths.add(name)

    def make_lengths(self, name: str, op: str, may_be_empty: bool = False) -> None:
        """An op (`max_pool`) defines the lengths of dynamic dim `name`: it must not have any yet.
        `may_be_empty`: some sequences may get no frame along it."""
        if self.dims[name].kind != "dynamic":
            raise DimError(f"`{op}` makes a dynamic dim; `{name}` is not one (declare it as Dim({name!r}))")
        if self.known_lengths is not None:
            if name in self.known_lengths:
                raise DimError(
                    f"`{name}` already has lengths (of an input, a loop or another op); "
                    f"`{op}` needs a dim of its own, e.g. Dim({(name + '_2')!r})"
                )
            self.known_lengths.add(name)
        self.dims[name].may_be_empty = may_be_empty

    def check_lengths(self, dims, op: str) -> None:
        """Tensors created over a dynamic dim take its lengths, so they must be known by now."""
        if self.known_lengths is None:
            return
        for d in dims:
            if self.dims[d].kind == "dynamic" and d not in self.known_lengths:
                raise DimError(
                    f"`{op}` over dynamic dim `{d}`, whose lengths are not known here: a dynamic dim gets "
                    "its lengths from an input, a loop or an op that makes it (`max_pool`)"
                )

    def scaled(self, base: str, factor: int) -> DimDef:
        """`factor * base`: a static dim named `4*hidden`."""
        b = self.dims[base]
        if b.size is None:
            raise DimError(f"cannot multiply dynamic dim `{base}`; only static dims scale")
        if factor < 1:
            raise DimError(f"a dim times {factor}: dims scale by a positive integer")
        if factor == 1:
            return b
        return self._derived(f"{factor}*{base}", factor * b.size)

    def part(self, whole: str, n: int) -> DimDef:
        """The dim of each of n equal parts of `whole` (`split`): `hidden` for `4*hidden`."""
        w = self.dims[whole]
        if w.size is None:
            raise DimError(f"cannot split dynamic dim `{whole}`")
        prefix = f"{n}*"
        if whole.startswith(prefix) and whole[len(prefix) :] in self.dims:
            return self.dims[whole[len(prefix) :]]
        if w.size % n:
            raise DimError(f"cannot split `{whole}` of size {w.size} into {n} equal parts")
        return self._derived(f"{whole}/{n}", w.size // n)

    def concat(self, parts: list[str]) -> DimDef:
        """`a + b` (also the dim `concat` makes): a static dim named `a+b`."""
        sizes = [self.dims[p].size for p in parts]
        if any(s is None for s in sizes):
            raise DimError("concat needs static feature dims")
        return self._derived("+".join(parts), sum(sizes))  # type: ignore[arg-type]

    def product(self, parts: list[str]) -> int:
        """The size of static dims taken together (`split_dims`, `merge_dims`)."""
        return math.prod(self.dims[p].size or 0 for p in parts)

    def window(self, size: int) -> DimDef:
        """The static dim `filter<size>` of a convolution's filter taps (a parameter's dim)."""
        return self._derived(f"filter{size}", size)

    def _derived(self, name: str, size: int) -> DimDef:
        old = self.dims.get(name)
        if old is not None:
            if old.size != size:  # e.g. a model's own `Dim("2*hidden", 5)` against `2 * hidden`
                raise DimError(
                    f"this makes dim `{name}` of size {size}, but the model declares `{name}` of size {old.size}"
                )
            return old
        if size > MAX_INT:
            raise DimError(f"dim `{name}` would have {size} entries, more than int64 holds")
        d = DimDef(name=name, kind="static", size=size)
        self.dims[name] = d
        return d

    def canonical(self, dims) -> tuple[str, ...]:
        """Batch first, then dynamic dims, then static dims; each group in declaration order."""
        order = {n: i for i, n in enumerate(self.dims)}
        uniq = list(dict.fromkeys(dims))
        return tuple(sorted(uniq, key=lambda n: (_GROUP[self.dims[n].kind], order[n])))

    def feature(self, dims: tuple[str, ...]) -> str:
        static = [d for d in dims if self.dims[d].kind == "static"]
        if len(static) != 1:
            shown = ", ".join(dims) or "no dims"
            raise DimError(f"expected exactly one static feature dim, got [{shown}]")
        return static[0]

    def dynamic(self, dims: tuple[str, ...]) -> list[str]:
        return [d for d in dims if self.dims[d].kind == "dynamic"]

    def as_list(self) -> list[DimDef]:
        return list(self.dims.values())

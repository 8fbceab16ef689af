"""Comparisons, selection and small shape layers: `compare` → `a < b`, `switch` → `where`,
`constant` → a number or `full`, `length` → a sum of ones over the time dim, `cast`,
`expand_dims` → `expand`, `split` (its sub-layers `split/0`, ...) → `split`, and the forms of
`reinterpret_data` that only rename: a copy, `size_base` (the two time dims are one, or the
first frames of a layer's as those of an input's: `fit_frames`), `set_axes` restating the
defaults, a new dim
tag for a dynamic dim (`replace_dim`), labels over another class dim (`set_sparse_dim`: `cast`)."""

from __future__ import annotations

import libcst as cst

from netc.importer.attention import new_dim
from netc.importer.dims import BATCH
from netc.importer.syntax import Expr, call, identifier, literal, name, num
from netc.importer.values import DIM, Refused, Val, feature, sources
from netc.importer.writer import Assign

KNOWN = {
    "compare": {"kind", "value", "allow_broadcast_all_sources"},
    "switch": {"condition", "true_from", "false_from"},
    "constant": {"value", "dtype", "with_batch_dim", "shape"},
    "length": {"axis", "dtype", "sparse", "add_time_axis"},
    "cast": {"dtype"},
    "expand_dims": {"axis", "dim"},
    "split": {"axis", "size_splits", "num_splits", "out_dims"},
    "reinterpret_data": {
        "size_base",
        "set_dim_tags",
        "enforce_batch_major",
        "enforce_time_major",
        "set_sparse",
        "set_sparse_dim",
        "set_axes",
    },
}
_COMPARE = {
    "equal": cst.Equal,
    "not_equal": cst.NotEqual,
    "less": cst.LessThan,
    "less_equal": cst.LessThanEqual,
    "greater": cst.GreaterThan,
    "greater_equal": cst.GreaterThanEqual,
}
_KIND_ALIASES = {"==": "equal", "!=": "not_equal", "<>": "not_equal", "<": "less", "<=": "less_equal"}
_KIND_ALIASES |= {">": "greater", ">=": "greater_equal"}
_DTYPES = ("float32", "int32", "bool")
NOT_NETC: dict[str, str] = {}


def _number(v) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _shown(imp, dims: list[str]) -> str:
    """Dims as the model writes them (a concatenation's: `a+b`)."""
    table = imp.dims.dims

    def one(key: str) -> str:
        d = table[imp.dims.find(key)]
        return "+".join(one(p) for p in d.parts) if d.parts else d.name

    return ", ".join(f"`{one(x)}`" for x in dims)


def _union(imp, vals: list[Val]) -> tuple[str, ...]:
    """The dims of an elementwise result: the operands' dims, in their order of appearance."""
    out: list[str] = []
    for v in vals:
        out += [x for x in v.dims if imp.dims.find(x) not in {imp.dims.find(y) for y in out}]
    return tuple(out)


class LogicLayers:
    """Handlers of `Importer` (`_l_<class>`), mixed into it."""

    def _l_compare(self, layer, d, scope, var, full) -> Val:
        kind = _KIND_ALIASES.get(d.get("kind", "equal"), d.get("kind", "equal"))
        if kind not in _COMPARE:
            raise Refused(full, "compare", f"kind {d.get('kind')!r} not supported")
        vals = [self.get(s, scope) for s in sources(d)]
        value = d.get("value")
        operands: list[Expr]
        if len(vals) == 1 and (_number(value) or isinstance(value, bool)):
            operands = [vals[0].tensor(), literal(value)]
        elif len(vals) == 2 and value is None:
            operands = [v.tensor() for v in vals]
        else:
            raise Refused(full, "compare", "one source with a number `value`, or two sources without, is supported")
        expr = cst.Comparison(operands[0], [cst.ComparisonTarget(_COMPARE[kind](), operands[1])])
        self._emit(scope, var, expr, layer)
        return Val(name(var), _union(self, vals))

    def _l_switch(self, layer, d, scope, var, full) -> Val:
        """`where(cond, a, b)`; a condition that is a bool is the branch it picks."""
        if d.get("from") not in (None, []):
            raise Refused(full, "switch", "`from` (RETURNN reads `condition`, `true_from`, `false_from`)")
        cond = d.get("condition")
        branches = []
        for key in ("true_from", "false_from"):
            b = d.get(key)
            if isinstance(b, str):
                branches.append(self.get(b, scope))
            elif _number(b):
                branches.append(Val(literal(b), ()))
            else:
                raise Refused(full, "switch", f"{key} {b!r} (a layer or a number is supported)")
        if isinstance(cond, bool):
            val = branches[0 if cond else 1]
            self._emit(scope, var, val.expr if val.dims == () else val.tensor(), layer)
            return Val(name(var), val.dims, val.sparse)
        if not isinstance(cond, str):
            raise Refused(full, "switch", f"condition {cond!r} (a layer or a bool is supported)")
        c = self.get(cond, scope)
        if len(branches) == 2 and all(b.dims for b in branches):
            find = self.dims.find
            a_only, b_only = (
                [x for x in v.dims if self.dims.is_static(x) and find(x) not in {find(y) for y in w.dims}]
                for v, w in (branches, branches[::-1])
            )
            same = len(a_only) == len(b_only) == 1 and self.dims.size(a_only[0]) == self.dims.size(b_only[0])
            if same:  # RETURNN matches them by size (a concatenation's dim and a layer's): the second renamed
                self.imports.add("split_dims")
                renamed = call(
                    "split_dims",
                    branches[1].tensor(),
                    axis=self.dim(b_only[0]),
                    dims=cst.Tuple([cst.Element(self.dim(a_only[0]))]),
                )
                branches[1] = Val(renamed, tuple(a_only[0] if x == b_only[0] else x for x in branches[1].dims))
            elif a_only and b_only:  # netc's dims of concatenations differ
                raise Refused(
                    full,
                    "switch",
                    f"branches over different dims ({_shown(self, a_only)} and {_shown(self, b_only)}: "
                    "of one size, made apart) not supported",
                )
        self.imports.add("where")
        self._emit(scope, var, call("where", c.tensor(), *(b.tensor() for b in branches)), layer)
        sparse = {b.sparse for b in branches if b.dims or b.sparse}
        return Val(name(var), _union(self, [c, *branches]), sparse.pop() if len(sparse) == 1 else None)

    def _l_constant(self, layer, d, scope, var, full) -> Val:
        """A number (no dims) is a Python number; `with_batch_dim` or a `shape` of static dim tags `full`."""
        value, dtype = d.get("value", 0.0), d.get("dtype")
        if not _number(value) and not isinstance(value, bool):
            raise Refused(full, "constant", f"value {value!r} (a number or a bool is supported)")
        if dtype is None:
            dtype = "bool" if isinstance(value, bool) else "int32" if isinstance(value, int) else "float32"
        if dtype not in _DTYPES:
            raise Refused(full, "constant", f"dtype {dtype!r} ({', '.join(_DTYPES)} are supported)")
        value = {"float32": float, "int32": int, "bool": bool}[dtype](value)
        dims: list[str] = [BATCH] if d.get("with_batch_dim") else []
        for tag in d.get("shape") or ():
            key = self.dims.tag(tag["__dim__"]) if isinstance(tag, dict) else None
            if key is None or not (key == BATCH or self.dims.is_static(key)):
                raise Refused(full, "constant", f"shape {d['shape']!r} (static dim tags are supported)")
            if key not in dims:
                dims.append(key)
        if not dims:
            self._emit(scope, var, literal(value), layer)
            return Val(name(var), ())
        self.imports.add("full")
        kwargs = {"value": literal(value)} | ({"dtype": literal(dtype)} if dtype != "float32" else {})
        self._emit(scope, var, call("full", *(self.dim(k) for k in dims), **kwargs), layer)
        return Val(name(var), tuple(dims))

    def _l_length(self, layer, d, scope, var, full) -> Val:
        """Each sequence's length [batch]: ones over its time dim, summed (padded frames never count).
        `sparse` (of int32) marks RETURNN's value as labels without a class dim: the same numbers
        (the latent attention configs clip positions to the lengths with it)."""
        src = self._source(d, scope, full)
        dtype = d.get("dtype", "int32")
        if d.get("add_time_axis") or (d.get("sparse") and dtype != "int32") or dtype not in ("int32", "float32"):
            raise Refused(full, "length", "dtype int32 or float32 (and no add_time_axis; sparse of int32) is supported")
        axis = self._axis(src, d.get("axis", "T"))
        if axis is None or not self.dims.is_dynamic(axis) or BATCH not in src.dims:
            raise Refused(full, "length", f"axis {d.get('axis', 'T')!r} (a dynamic dim of the input is supported)")
        self.imports |= {"full", "reduce_sum"}
        one = {"value": num(1), "dtype": literal("int32")} if dtype == "int32" else {"value": num(1.0)}
        ones = call("full", self.dim(BATCH), self.dim(axis), **one)
        self._emit(scope, var, call("reduce_sum", ones, axis=self.dim(axis)), layer)
        return Val(name(var), (BATCH,))

    def _l_cast(self, layer, d, scope, var, full) -> Val:
        src = self._source(d, scope, full)
        dtype = d.get("dtype")
        if dtype not in _DTYPES:
            raise Refused(full, "cast", f"dtype {dtype!r} ({', '.join(_DTYPES)} are supported)")
        self.imports.add("cast")
        self._emit(scope, var, call("cast", src.tensor(), literal(dtype)), layer)
        return Val(name(var), src.dims, src.sparse if dtype == "int32" else None)

    def _l_expand_dims(self, layer, d, scope, var, full) -> Val:
        """`expand(x, dim)`: x repeated along a new dim (of size `dim`, 1 by default); where it goes
        (`axis`) is RETURNN's axis order, which netc's named dims do not have."""
        src = self._source(d, scope, full)
        axis, size = d.get("axis"), d.get("dim", 1)
        ok = isinstance(axis, int) and not isinstance(axis, bool)
        if not ok and str(axis).lower() not in ("f", "feature", "t", "time", "spatial"):
            raise Refused(full, "expand_dims", f"axis {axis!r} (F, T, spatial or a number is supported)")
        if isinstance(size, dict):
            key = self.dims.tag(size["__dim__"])
            if key == BATCH or self.dims.find(key) in {self.dims.find(x) for x in src.dims}:
                raise Refused(full, "expand_dims", "dim: a dim the input does not have")
        elif isinstance(size, int) and not isinstance(size, bool) and size >= 1:
            key = new_dim(self, size, f"{identifier(layer)}_dim", set(src.dims))
        else:
            raise Refused(full, "expand_dims", f"dim {size!r} (a size or a dim tag is supported)")
        if src.sparse is None and not isinstance(size, dict) and (ok or str(axis).lower() not in ("f", "feature")):
            # a number or T: RETURNN's feature axis stays the input's (the last feature-kind axis)
            try:
                feature(src, self.dims)
                self.dims.not_feature.add(self.dims.find(key))
            except Refused:
                pass
        self.imports.add("expand")
        self._emit(scope, var, call("expand", src.tensor(), self.dim(key)), layer)
        return Val(name(var), (*src.dims, key), src.sparse)  # labels stay labels

    def _l_split(self, layer, d, scope, var, full) -> Val:
        """`x_0, x_1 = split(x, [a, b])` over the feature dim; `<layer>/<i>` reads part i. The
        layer's own value is its input."""
        src = self._source(d, scope, full)
        if src.sparse is not None:
            raise Refused(full, "split", "labels (sparse) as input")
        feat = feature(src, self.dims)
        if self._axis(src, d.get("axis", "F")) != feat:
            raise Refused(full, "split", f"axis {d.get('axis')!r} (the feature dim is supported)")
        total = self.dims.size(feat)
        if "out_dims" in d:
            tags = d["out_dims"] if isinstance(d["out_dims"], list | tuple) else [None]
            if not all(isinstance(t, dict) for t in tags):
                raise Refused(full, "split", f"out_dims {d['out_dims']!r} (dim tags are supported)")
            keys = [self.dims.tag(t["__dim__"]) for t in tags]
            sizes = [self.dims.size(k) for k in keys]
        else:
            sizes = d.get("size_splits")
            n = d.get("num_splits")
            if sizes is None and isinstance(n, int) and n >= 1 and total % n == 0:
                sizes = [total // n] * n
            if not isinstance(sizes, list | tuple) or not all(isinstance(s, int) and s > 0 for s in sizes):
                raise Refused(full, "split", "size_splits (positive sizes), num_splits or out_dims is supported")
            keys = [new_dim(self, s, f"{identifier(layer)}_{i}", {feat}) for i, s in enumerate(sizes)]
        if sum(sizes) != total or any(self.dims.find(k) == self.dims.find(feat) for k in keys):
            raise Refused(full, "split", f"parts {list(sizes)!r} do not add up to the feature dim's {total}")
        parts = [self.fresh(f"{var}_{i}") for i in range(len(keys))]
        self.imports.add("split")
        value = call("split", src.tensor(), cst.List([cst.Element(self.dim(k)) for k in keys]))
        comment = f"layer {layer!r}: its parts `{layer}/0`, ..." if len(parts) > 1 else f"layer {layer!r}"
        scope.stmts.append(Assign(parts if len(parts) > 1 else [parts[0]], value, comment=comment))
        rest = tuple(x for x in src.dims if x != feat)
        for i, (part, key) in enumerate(zip(parts, keys)):
            self.sub_layers[f"{full}/{i}"] = Val(name(part), (*rest, key))
        return src

    def _l_reinterpret_data(self, layer, d, scope, var, full) -> Val:
        src = self._source(d, scope, full)
        value = src.tensor()
        dims = src.dims
        if "size_base" in d:
            value, dims = self._size_base(d, scope, src, full)
        if "set_axes" in d:
            self._set_axes(d, src, full)
        tags = d.get("set_dim_tags") or {}
        pairs = list(tags.items()) if isinstance(tags, dict) else tags  # or a list of (old tag, new tag)
        if not isinstance(pairs, list) or not all(isinstance(p, list | tuple) and len(p) == 2 for p in pairs):
            raise Refused(full, "reinterpret_data", f"set_dim_tags {tags!r} (a dict or a list of pairs)")
        for ax, tag in pairs:
            old = self._axis(src, ax) if isinstance(ax, dict) or ax in ("T", "F", "t", "f") else None
            if old is None or old not in src.dims or not isinstance(tag, dict):
                raise Refused(full, "reinterpret_data", f"set_dim_tags {tags!r} (T, F or dim tags to dim tags)")
            known = tag["__dim__"] in self.dims._by_tag
            new = self.dims.tag(tag["__dim__"])
            if self.dims.find(new) == self.dims.find(old):
                continue  # the same dim (every static dim of one size is one)
            if known or not self.dims.is_dynamic(old) or not self.dims.is_dynamic(new):
                raise Refused(full, "reinterpret_data", f"set_dim_tags {tags!r}: a new tag for a dynamic dim only")
            self.imports.add("replace_dim")
            value = call("replace_dim", value, axis=self.dim(old), out_axis=self.dim(new))
            dims = tuple(new if x == old else x for x in dims)
        sparse = src.sparse
        if d.get("set_sparse") is not None and (d["set_sparse"] is not True or src.sparse is None):
            raise Refused(full, "reinterpret_data", f"set_sparse {d['set_sparse']!r} (True of labels, no change, is)")
        if "set_sparse_dim" in d:  # the labels read over another class dim
            sparse = self._set_sparse_dim(layer, d, src, full)
            if self.dims.find(sparse) != self.dims.find(src.sparse):
                self.imports.add("cast")
                value = call("cast", value, literal("int32"), class_dim=self.dim(sparse))
        self._emit(scope, var, value, layer)
        return Val(name(var), dims, sparse)

    def _set_axes(self, d: dict, src: Val, full: str) -> None:
        """`set_axes` that restates a batch-major [B, T, F] value's time axis (1: its dynamic dim,
        or a dim of size 1 a `reduce` kept in its place) and feature axis (2: its static dim),
        which RETURNN has there already: nothing changes (netc's dims are named; the conformer
        hybrids' i-vector layers). Others move the axes' meaning (which dim a later `T`/`F`
        names): refused."""
        axes = d["set_axes"]
        dims = src.dims
        if isinstance(axes, dict) and axes and all(self._restates(src, k, v) for k, v in axes.items()):
            return
        ok = (
            isinstance(axes, dict)
            and d.get("enforce_batch_major") is True
            and len(dims) == 3
            and dims[0] == BATCH
            and src.sparse is None
            and (self.dims.is_dynamic(dims[1]) or self.dims.size(dims[1]) == 1)
            and self.dims.is_static(dims[2])
            and all(
                isinstance(k, str) and isinstance(v, int) and {"T": 1, "F": 2}.get(k.upper()) == v
                for k, v in axes.items()
            )
        )
        if not ok:
            raise Refused(
                full,
                "reinterpret_data",
                f"set_axes {axes!r} (with enforce_batch_major, of a [B, T, F] value: T 1 and F 2, RETURNN's axes "
                "there already, are supported)",
            )

    def _restates(self, src: Val, key, ax) -> bool:
        """Whether `set_axes` entry `key: ax` (`"t"`/`"f"` and a dim by its tag, `"stag:lstm"`) names
        the axis RETURNN has there already, or one netc's named dims make no difference to: the
        time axis of a value with one dynamic dim, or as the feature axis the one dim beside batch
        of [batch, time] (the latent attention configs' scores over the encoder's frames, which
        their `choice` chooses over: netc's `choice` takes a dynamic class dim as it is)."""
        if not isinstance(key, str) or key.upper() not in ("T", "F") or not isinstance(ax, str | dict):
            return False
        if isinstance(ax, str) and not ax.startswith("stag:"):
            return False
        dim = self._axis(src, ax)
        dynamic = [x for x in src.dims if self.dims.is_dynamic(x)]
        if dim is None or src.sparse is not None or dynamic != [dim]:
            return False
        return key.upper() == "T" or src.dims == (BATCH, dim)

    def _size_base(self, d: dict, scope, src: Val, full: str) -> tuple[Expr, tuple]:
        """`size_base`: the layer's frames are those of another layer's one time dim, whose lengths
        they take. Both an input's dims: one dim (the inputs give it one set of lengths). The
        layer's a dim it makes of an input's frames (a hybrid model's upsampled encoder) and the
        base's an input's (the alignment, one label per feature frame): those inputs' time dims are
        one, and each sequence's first n frames are taken (`fit_frames`), as many as RETURNN's
        lengths mark valid. The base's a dim a layer makes (a downsampled encoder's frames): the
        layer's frames read over it the same way (an alignment input over the encoder's frames, a
        pooled i-vector over a strided front end's); `netc verify` draws such an input's lengths
        as the base's (RETURNN reads the alignment as one label per encoder frame)."""
        base = self.get(d["size_base"], scope) if isinstance(d["size_base"], str) else None
        mine = [x for x in src.dims if self.dims.is_dynamic(x)]
        theirs = [x for x in base.dims if self.dims.is_dynamic(x)] if base else []
        if len(mine) != 1 or len(theirs) != 1:
            raise Refused(full, "reinterpret_data", "size_base: a layer of one time dim, the base of one time dim")
        return self._frames_over(src, mine[0], theirs[0], full, "reinterpret_data", "size_base")

    def _frames_over(self, src: Val, own: str, other: str, full: str, cls: str, what: str) -> tuple[Expr, tuple]:
        """`src`'s frames along its time dim `own` read over the time dim `other` (`size_base`, a
        `slice_nd` of the first frames): one dim, or each sequence's first frames (`fit_frames`)."""
        mine, theirs = [own], [other]
        if self.dims.find(mine[0]) == self.dims.find(theirs[0]):
            return src.tensor(), src.dims
        inputs = {self.dims.find(x) for v in self.inputs.values() for x in v.dims if self.dims.is_dynamic(x)}
        if self.dims.find(theirs[0]) in inputs:
            if self.dims.find(mine[0]) in inputs:
                self.dims.join(theirs[0], mine[0])
                return src.tensor(), src.dims
            others = inputs - {self.dims.find(theirs[0])}
            if len(others) > 1:  # which input's frames the layer's are made of is not known here
                raise Refused(full, cls, f"{what}: a dim a layer makes, with several inputs' time dims it may be of")
            for other in others:  # its frames are the base's: one dim
                self.dims.join(theirs[0], other)
        self.imports.add("fit_frames")
        value = call("fit_frames", src.tensor(), axis=self.dim(mine[0]), out_axis=self.dim(theirs[0]))
        return value, tuple(theirs[0] if x == mine[0] else x for x in src.dims)

    def _set_sparse_dim(self, layer: str, d: dict, src: Val, full: str) -> str:
        """`set_sparse_dim` (a number of classes or a dim tag) of labels: their new class dim (their
        values kept, as RETURNN keeps them: a transducer's labels with the blank masked away)."""
        new = d["set_sparse_dim"]
        if src.sparse is None:
            raise Refused(full, "reinterpret_data", "set_sparse_dim of an input that is not labels (sparse)")
        if isinstance(new, dict) and DIM in new:
            tag = self.dims.tag(new[DIM])
        elif isinstance(new, int) and not isinstance(new, bool) and new >= 1:
            tag = self.dims.static(new, identifier(f"{layer}_classes"))
        else:
            raise Refused(full, "reinterpret_data", f"set_sparse_dim {new!r} (a number of classes or a dim tag)")
        if not self.dims.is_static(tag):
            raise Refused(full, "reinterpret_data", f"set_sparse_dim {new!r}: a static dim")
        return tag

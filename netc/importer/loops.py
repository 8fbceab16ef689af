"""A `rec` layer with a subnetwork unit as a `for` loop over its time dim.

The loop steps over the rec layer's input (`for x_t in x:`, `data:source` is the frame) or, for
a rec layer with no input (`from: []`, as netc writes them), over the sequences its
`rec_unstack` layers unstack (`for a_t, b_t in zip(a, b):`). `prev:x` reads the state `x`, whose
value before the loop is the layer's `initial_output`; `base:x` reads the outer value (a whole
sequence where it has the loop's dim); the unit's `output` is stacked into a list named after the
rec layer. Losses of unit layers are marked after the loop, on their stacked logits."""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from netc.importer.dims import BATCH
from netc.importer.syntax import call, identifier, name
from netc.importer.values import PREV, Refused, Scope, Val, sources, tf_scope
from netc.importer.writer import Append, Assign, Loop


def import_loop(imp, layer: str, d: dict, scope: Scope, var: str, full: str, unit: dict) -> Val:
    if scope.rec is not None:
        raise Refused(full, "rec", "a loop nested in a rec unit is not supported yet")
    if "output" not in unit:
        raise Refused(full, "rec", "its unit has no `output` layer")
    inner = Scope(unit, {}, [], f"{tf_scope(layer)}/rec/", outer=scope, rec=layer)
    inner.names = imp._allocate(list(unit), set(), prefix=var)
    imp.used |= set(inner.names.values())
    choices = [n for n, ld in unit.items() if isinstance(ld, dict) and ld.get("class") == "choice"]
    if choices:
        from netc.importer.decoders import import_decoder

        return import_decoder(imp, layer, d, scope, var, full, unit, inner, choices)
    # the unit unstacks outer sequences itself (netc's form, and a second sequence of a loop over `from`)
    unstack = [n for n, ld in unit.items() if isinstance(ld, dict) and ld.get("class") == "rec_unstack"]
    seqs = [(imp._source(d, scope, full), None)] if sources(d) else []
    if not seqs and not unstack:
        raise Refused(full, "rec", "a rec layer without input needs `rec_unstack` layers (or `from`)")
    seqs += [(imp.get(_base(unit[n], f"{full}/{n}"), scope), n) for n in unstack]
    times = set()
    for src, n in seqs:
        dyn = [x for x in src.dims if imp.dims.is_dynamic(x)]
        if len(dyn) != 1:
            raise Refused(full, "rec", "each sequence it steps over needs exactly one time dim")
        axis = unit[n].get("axis") if n is not None else None
        if isinstance(axis, dict) and imp.dims.find(imp.dims.tag(axis["__dim__"])) != imp.dims.find(dyn[0]):
            raise Refused(f"{full}/{n}", "rec_unstack", "axis: a dim tag other than its input's time dim")
        times.add(imp.dims.find(dyn[0]))
    if len(times) != 1:
        raise Refused(full, "rec", "the sequences it steps over have different time dims")
    inner.time = time = times.pop()
    if d.get("size_target") is not None:  # the loop's length in training: that of the sequence it steps over
        size = imp._input(d["size_target"]) if isinstance(d["size_target"], str) else None
        if size is None or [imp.dims.find(x) for x in size.dims if imp.dims.is_dynamic(x)] != [time]:
            raise Refused(full, "rec", f"size_target {d['size_target']!r}: another length than its input's")
    frames = []
    for src, unstack_layer in seqs:
        base = identifier(sources(d)[0]) if unstack_layer is None and len(sources(d)) == 1 else var
        own = base if unstack_layer is None else identifier(unstack_layer)
        if unstack_layer is not None and own.endswith("_t"):  # named as a frame already
            var_t = inner.names[unstack_layer]
        else:
            var_t = imp.fresh(f"{own}_t")
        frame = Val(name(var_t), ())
        frame.dims = tuple(x for x in src.dims if imp.dims.find(x) != time)
        frame.sparse = src.sparse
        frames.append(frame)
        if unstack_layer is None:
            inner.frame = frame
        else:
            inner.vals[unstack_layer] = frame
    imp.loops[layer] = inner
    stack = var
    scope.stmts.append(Assign([stack], cst.List([])))
    out, body = unit_body(imp, layer, scope, inner, unit, stack)
    body = imp.count_steps(layer, body)
    iters = [src.expr if isinstance(src.expr, cst.Name) else src.tensor() for src, _ in seqs]
    iterable = iters[0] if len(iters) == 1 else call("zip", *iters)
    targets = [f.expr.value for f in frames]
    scope.stmts.append(Loop(targets, iterable, body, comment=f"layer {layer!r}: a rec unit, one step per frame"))
    mark_unit_losses(imp, layer, inner, scope)
    return Val(name(stack), (BATCH, time, *(x for x in out.dims if x != BATCH)), is_list=True)


def unit_body(imp, layer: str, scope: Scope, inner: Scope, unit: dict, stack: str) -> tuple[Val, list]:
    """The unit's statements (its `output`, layers with losses, layers only read by `prev:`), the
    `output` appended to `stack` and the layers read from outside stacked too; `prev:` resolved."""
    roots = ["output"] + [n for n, ld in unit.items() if n != "output" and ld.get("loss")]
    for r in roots:
        imp.get(r, inner)
    while missing := [s for s in inner.states if s not in inner.vals]:  # states only `prev:` reads
        imp.get(missing[0], inner)
    out = inner.vals["output"]
    inner.stmts.append(Append(stack, out.expr))
    for sub in _read_from_outside(layer, unit, scope):  # `<rec>/<sub>`: stacked too
        val = imp.get(sub, inner)
        lst = imp.fresh(f"{stack}_{identifier(sub)}_seq")
        scope.stmts.append(Assign([lst], cst.List([])))
        inner.stmts.append(Append(lst, val.expr))
        dims = (BATCH, inner.time, *(x for x in val.dims if x != BATCH))
        imp.sub_stacks[f"{layer}/{sub}"] = Val(name(lst), dims, val.sparse, is_list=True)
    return out, resolve_prev(inner)


def mark_unit_losses(imp, layer: str, inner: Scope, scope: Scope) -> None:
    for lname, kind, logits, target, axis, smoothing, lfull in inner.losses:
        imp._mark_loss(f"{layer}/{lname}", kind, logits, target, axis, smoothing, lfull, scope, False)


def _read_from_outside(layer: str, unit: dict, scope: Scope) -> list[str]:
    """The unit's layers other than `output` that layers outside read as `<layer>/<sub>`."""
    found: list[str] = []

    def walk(v):
        if isinstance(v, str) and v.startswith(layer + "/"):
            sub = v[len(layer) + 1 :]
            if sub in unit and sub != "output" and sub not in found:
                found.append(sub)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk([d for name, d in scope.layers.items() if name != layer])
    return found


def _base(d: dict, full: str) -> str:
    src = sources(d)
    if len(src) != 1 or not src[0].startswith("base:"):
        raise Refused(full, "rec_unstack", "only `rec_unstack` of one `base:` layer is supported")
    extra = set(d) - {"class", "from", "axis"}
    axis = d.get("axis", "T")  # T, or a dim tag: the sequence's one time dim (checked with the others)
    if extra or not (isinstance(axis, dict) or str(axis).upper() in ("T", "TIME")):
        raise Refused(full, "rec_unstack", f"options {sorted(extra) or ['axis']} not supported (axis T is)")
    return src[0][5:]


def resolve_prev(scope: Scope) -> list:
    """Each `prev:x` read as `x` where it stands before `x`'s statement, else through an alias
    `x_prev = x` at the top of the body (then `x` there is still the previous step's)."""
    assigned_at: dict[str, int] = {}
    for i, s in enumerate(scope.stmts):
        if isinstance(s, Assign):
            for t in s.targets:
                assigned_at.setdefault(t, i)
    late: set[str] = set()
    for i, s in enumerate(scope.stmts):
        for n in _placeholders(s):
            if i > assigned_at.get(n, len(scope.stmts)):
                late.add(n)
    aliases = {n: f"{n}_prev" for n in sorted(late)}
    head = [Assign([a], name(n), comment="the previous step's") for n, a in aliases.items()]
    read = {n for s in scope.stmts for n in _placeholders(s)}  # a cell's `c` too, not only the layers'
    renamer = _Rename({PREV + n: aliases.get(n, n) for n in set(scope.names.values()) | read})
    out = []
    for s in head + scope.stmts:
        if isinstance(s, Assign):
            out.append(replace(s, value=s.value.visit(renamer), search=s.search and s.search.visit(renamer)))
        elif isinstance(s, Append):
            out.append(Append(s.target, s.value.visit(renamer)))
        else:
            out.append(s)
    return out


class _Collect(cst.CSTVisitor):
    def __init__(self):
        self.found: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        if node.value.startswith(PREV):
            self.found.add(node.value[len(PREV) :])


def _placeholders(s) -> set[str]:
    if not isinstance(s, Assign | Append):
        return set()
    v = _Collect()
    s.value.visit(v)
    if isinstance(s, Assign) and s.search is not None:
        s.search.visit(v)
    return v.found


class _Rename(cst.CSTTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.mapping[updated.value]) if updated.value in self.mapping else updated

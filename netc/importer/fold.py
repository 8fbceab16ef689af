"""Folding repeated layer stacks into `Module` classes: layers named alike up to a number
(`lstm0_fw`, `lstm0_bw`, `lstm1_fw`, ...) whose statements are the same up to what they read
become one class and, per number, an instance and a call of it.

A family is the top-level statements whose targets are `<prefix><number><suffix>`, one group per
number. The statements the groups have in common (the same suffixes in the same order, at the
start of each group, one after another in the body) fold when their expressions are the same in
all groups but for sub-expressions with no module construction and no value of the group itself:
those become the call's arguments (the group's input, a dim of its own). The constructions must
be the same in all groups (they move to `__init__`), so are the numbers. Anything else stays as
it was: the fold changes no computation, only the modules' paths (`lstm0/fw` for `lstm0_fw`),
which the name map carries (by the lines of the instance and of the attribute)."""

from __future__ import annotations

import dataclasses
import keyword
import re
from dataclasses import dataclass, field

import libcst as cst

from netc.importer.syntax import call, identifier, name
from netc.importer.writer import Append, Assign, Loop, ModuleRef


@dataclass
class ClassDef:
    name: str
    init: list[tuple[str, cst.BaseExpression]]  # attribute, constructor
    params: list[str]
    body: list[Assign]
    returns: list[str]


@dataclass
class Instance:
    """`var = Cls()`: the instance of a folded group; each attribute's module by its RETURNN layer."""

    var: str
    cls: str
    members: dict[str, ModuleRef] = field(default_factory=dict)
    comment: str | None = None


class _NoFold(Exception):
    pass


_NUMBER = re.compile(r"\d+")


def _is_ctor(node: cst.CSTNode) -> bool:
    """`Linear(dim)` in `Linear(dim)(x)`: a module's construction."""
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value[:1].isupper()


def _ctor_calls(node: cst.CSTNode) -> list[cst.Call]:
    """The module constructions in `node` (itself too)."""
    found = []

    class V(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            if _is_ctor(n):
                found.append(n)

    node.visit(V())
    return found


def _names(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

        def visit_Arg(self, n: cst.Arg) -> bool:  # keywords are no names read
            n.value.visit(self)
            return False

        def visit_Attribute(self, n: cst.Attribute) -> bool:
            n.value.visit(self)
            return False

    node.visit(V())
    return found


def _made_dims(node: cst.CSTNode) -> set[str]:
    """The dims an expression makes: the names given as `out_axis` (`replace_dim`, `max_pool`, ...)."""
    out: set[str] = set()

    class V(cst.CSTVisitor):
        def visit_Arg(self, n: cst.Arg) -> None:
            if n.keyword is not None and n.keyword.value == "out_axis" and isinstance(n.value, cst.Name):
                out.add(n.value.value)

    node.visit(V())
    return out


def _is_number(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.UnaryOperation):
        return _is_number(node.expression)
    return isinstance(node, (cst.Integer, cst.Float, cst.SimpleString))


class _Unifier:
    """The common form of one statement's expression over all groups: where the groups differ
    (or read a value of the network), an argument of the call."""

    def __init__(self, members: set[str], locals_: set[str], dims: set[str], prefixes: list[str], reserved: set[str]):
        self.members, self.locals, self.dims, self.prefixes = members, locals_, dims, prefixes
        self.reserved = reserved  # names an argument must not take
        self.args: dict[tuple[str, ...], str] = {}  # each group's expression (code) -> argument
        self.arg_values: dict[str, list[cst.BaseExpression]] = {}
        # dims the groups' statements make (`out_axis=`): an expression over one is computed inside
        # the module, where the dim has its lengths (passed in, the dim alone is an argument)
        self.made: set[str] = set()

    def _arg(self, nodes: list) -> cst.Name:
        key = tuple(cst.Module([]).code_for_node(n) for n in nodes)
        if any("dropout" in _names(n) for n in nodes):  # each its own mask, as in the original
            key = (*key, str(len(self.args)))
        if key not in self.args:
            first = nodes[0]
            if isinstance(first, cst.Name) and all(isinstance(n, cst.Name) and n.value in self.dims for n in nodes):
                base = (
                    identifier(first.value[len(self.prefixes[0]) :])
                    if first.value.startswith(self.prefixes[0])
                    else "dim"
                )
            else:
                base = "x"
            arg, i = base, 2
            while arg in self.args.values() or arg in self.reserved:
                arg, i = f"{base}{i}", i + 1
            self.args[key] = arg
            self.arg_values[arg] = list(nodes)
        return name(self.args[key])

    def unify(self, nodes: list):
        first = nodes[0]
        same = all(n.deep_equals(first) for n in nodes[1:])
        if any(_is_ctor(n) for n in nodes):  # the construction itself: the same in every group
            if not same:
                raise _NoFold
            return first
        if isinstance(first, cst.BaseExpression) and any(_ctor_calls(n) for n in nodes):
            pass  # computed inside the module: recurse
        elif isinstance(first, cst.BaseExpression):
            reads = set().union(*(_names(n) for n in nodes))
            if same and not (reads & self.locals):
                return first  # a constant: dims, numbers, the group's own values
            over_made = bool(reads & self.made) and not all(isinstance(n, cst.Name) for n in nodes)
            if not (reads & self.members) and not any(_is_number(n) for n in nodes) and not over_made:
                return self._arg(nodes)
        if same and not isinstance(first, cst.BaseExpression):
            if not (set().union(*(_names(n) for n in nodes)) & self.locals):
                return first
        if any(type(n) is not type(first) for n in nodes):
            raise _NoFold
        changes = {}
        for f in dataclasses.fields(first):
            vals = [getattr(n, f.name) for n in nodes]
            v0 = vals[0]
            if all(isinstance(v, cst.CSTNode) for v in vals):
                keep = (isinstance(first, cst.Arg) and f.name == "keyword") or (
                    isinstance(first, cst.Attribute) and f.name == "attr"
                )
                if keep or (isinstance(first, cst.Call) and f.name == "func" and not _is_ctor(v0)):
                    if not all(v.deep_equals(v0) for v in vals[1:]):
                        raise _NoFold
                    changes[f.name] = v0
                else:
                    changes[f.name] = self.unify(vals)
            elif isinstance(v0, (list, tuple)) and v0 and isinstance(v0[0], cst.CSTNode):
                if any(not isinstance(v, (list, tuple)) or len(v) != len(v0) for v in vals):
                    raise _NoFold
                changes[f.name] = type(v0)(self.unify([v[i] for v in vals]) for i in range(len(v0)))
            elif any(v != v0 for v in vals[1:]):  # a name's text, an operator, None against a node
                raise _NoFold
        return first.with_changes(**changes)


class _Rename(cst.CSTTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.Name:
        return updated.with_changes(value=self.names[updated.value]) if updated.value in self.names else updated

    def leave_Arg(self, original: cst.Arg, updated: cst.Arg) -> cst.Arg:
        return updated.with_changes(keyword=original.keyword)  # keywords are no names

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.Attribute:
        return updated.with_changes(attr=original.attr)


class _SelfCtor(cst.CSTTransformer):
    """`Linear(dim)(x)` -> `self.<attr>(x)`."""

    def __init__(self, attr: str):
        self.attr = attr

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if _is_ctor(original.func):
            return updated.with_changes(func=cst.Attribute(name("self"), name(self.attr)))
        return updated


def _all_names(stmts: list) -> set[str]:
    out: set[str] = set()
    for s in stmts:
        if isinstance(s, Loop):
            out |= _names(s.iterable) | _all_names(s.body)
        elif isinstance(s, Instance):
            continue
        elif hasattr(s, "value"):
            out |= _names(s.value) | ({s.target} if isinstance(s, Append) else set())
            out |= _names(s.search) if getattr(s, "search", None) is not None else set()
        elif hasattr(s, "cond"):
            out |= _names(s.cond)
    return out


def _targets(stmts: list) -> set[str]:
    out: set[str] = set()
    for s in stmts:
        if isinstance(s, Assign):
            out |= set(s.targets)
        elif isinstance(s, Loop):
            out |= set(s.var) | _targets(s.body)
    return out


def _count_assigned(stmts: list, counts: dict[str, int] | None = None) -> dict[str, int]:
    counts = counts if counts is not None else {}
    for s in stmts:
        if isinstance(s, Assign):
            for t in s.targets:
                counts[t] = counts.get(t, 0) + 1
        elif isinstance(s, Append):  # a list grown in a loop: a state
            counts[s.target] = counts.get(s.target, 0) + 1
        elif isinstance(s, Loop):
            _count_assigned(s.body, counts)
    return counts


class Folder:
    def __init__(self, body: list, outputs: list, inputs: list[str], dims: set[str], used: set[str], layers: set[str]):
        self.body, self.outputs, self.inputs, self.dims, self.layers = body, outputs, inputs, dims, layers
        self.used = set(used) | dims
        self.classes: list[ClassDef] = []
        self.locals = _targets(body) | set(inputs)
        self.assigned = _count_assigned(body)

    def run(self) -> list:
        self.assigned = _count_assigned(self.body)
        families: dict[str, dict[str, list[int]]] = {}
        for i, s in enumerate(self.body):
            if not isinstance(s, Assign) or s.note:
                continue
            real = [t for t in s.targets if t != "_"]
            if not real:
                continue
            for m in _NUMBER.finditer(real[0]):
                prefix, num = real[0][: m.start()], m.group()
                pat = re.compile(re.escape(prefix + num) + r"(?!\d)")
                if prefix and all(pat.match(t) for t in real):
                    families.setdefault(prefix, {}).setdefault(num, []).append(i)
        order = sorted(families.items(), key=lambda kv: -sum(len(v) for v in kv[1].values()))
        for prefix, groups in order:
            nums = sorted(groups, key=lambda n: groups[n][0])
            for tries in (nums, nums[1:], nums[:-1]):  # all blocks, else all but the first or last
                if len(tries) < 2:
                    continue
                try:
                    self._fold(prefix, tries, {n: groups[n] for n in tries})
                except _NoFold:
                    continue
        return self.body

    def _fold(self, prefix: str, nums: list[str], groups: dict[str, list[int]]) -> None:
        def sig(n: str, i: int) -> tuple[str, ...]:
            return tuple(t if t == "_" else t[len(prefix + n) :] for t in self.body[i].targets)

        k = min(len(v) for v in groups.values())
        for j in range(k):  # the same suffixes, none a loop's state (assigned again)
            if len({sig(n, groups[n][j]) for n in nums}) != 1 or any(
                self.assigned[t] > 1 for n in nums for t in self.body[groups[n][j]].targets if t != "_"
            ):
                k = j
                break
        for n in nums:  # the folded statements follow one another in each group
            idx = groups[n]
            k = min(k, next((j for j in range(1, k) if idx[j] != idx[0] + j), k))
        while k >= 2 and any(self._splits_layer(groups[n][0], k) for n in nums):
            k -= 1
        if k < 2:
            raise _NoFold
        stmts = {n: [self.body[i] for i in groups[n][:k]] for n in nums}
        if any(s.note for n in nums for s in stmts[n]):
            raise _NoFold
        first = nums[0]
        # the group's own values, by their local names in `__call__`
        taken = self.used | {"self", "Module"} | set(keyword.kwlist)
        local: dict[str, str] = {}
        for s in stmts[first]:
            for t in s.targets:
                if t == "_":
                    continue
                base = identifier(t[len(prefix + first) :]) if t != prefix + first else "out"
                v, i = base, 2
                while v in taken or v in local.values():
                    v, i = f"{base}{i}", i + 1
                local[t[len(prefix + first) :]] = v
        members_of = {
            n: {t: local[t[len(prefix + n) :]] for s in stmts[n] for t in s.targets if t != "_"} for n in nums
        }
        placeholders = {n: _Rename(members_of[n]) for n in nums}
        uni = _Unifier(
            set(local.values()), self.locals, self.dims, [prefix + n for n in nums], taken | set(local.values())
        )
        uni.made = {m for n in nums for st in stmts[n] for m in _made_dims(st.value)}
        init: list[tuple[str, cst.BaseExpression]] = []
        body: list[Assign] = []
        refs: dict[str, dict[str, ModuleRef]] = {n: {} for n in nums}
        for j in range(k):
            per = [stmts[n][j] for n in nums]
            ctors = [_ctor_calls(s.value) for s in per]
            if any(len(c) != (s.module is not None) for c, s in zip(ctors, per)):
                raise _NoFold
            value = uni.unify([s.value.visit(placeholders[n]) for n, s in zip(nums, per)])
            targets = [t if t == "_" else local[t[len(prefix + first) :]] for t in per[0].targets]
            if per[0].module is not None:
                attr = next(t for t in targets if t != "_")
                init.append((attr, ctors[0][0]))
                value = value.visit(_SelfCtor(attr))
                for n, s in zip(nums, per):
                    refs[n][attr] = s.module
            comment = per[0].comment if all(s.comment == per[0].comment for s in per) else None
            body.append(Assign(targets, value, comment=comment))
        if not init:
            raise _NoFold
        # the values read after the folded statements: what the call returns
        folded = {i for n in nums for i in groups[n][:k]}
        rest = [s for i, s in enumerate(self.body) if i not in folded]
        reads = _all_names(rest) | set().union(*(_names(e) for _, e in self.outputs))
        returns = [v for sfx, v in local.items() if any(prefix + n + sfx in reads for n in nums)]
        if not returns:
            raise _NoFold
        cls = self._class_name(prefix)
        self.classes.append(ClassDef(cls, init, list(uni.arg_values), body, returns))
        self.used.add(cls)
        new_body: list = []
        for i, s in enumerate(self.body):
            n = next((n for n in nums if groups[n][0] == i), None)
            if n is not None:
                inst = identifier((prefix + n).rstrip("_"))
                inst_base, c = inst, 2
                while inst in self.used or inst in self.locals:
                    inst, c = f"{inst_base}_mod" if c == 2 else f"{inst_base}_mod{c}", c + 1
                self.used.add(inst)
                layers = self._layers(stmts[n])
                if len(layers) > 4:
                    comment = f"{len(layers)} layers, {layers[0]!r} to {layers[-1]!r}"
                else:
                    comment = "layers " + ", ".join(repr(x) for x in layers) if layers else None
                new_body.append(Instance(inst, cls, refs[n], comment))
                args = [uni.arg_values[a][nums.index(n)] for a in uni.arg_values]
                outs = [prefix + n + sfx for sfx, v in local.items() if v in returns]
                new_body.append(Assign(outs, call(cst.Name(inst), *args)))
            elif i not in folded:
                new_body.append(s)
        self.body = new_body
        raise _Refound  # the statements moved: the families are found again on the new body

    def _splits_layer(self, start: int, k: int) -> bool:
        """Whether the statement after `body[start:start + k]` computes more of a layer those do
        (the heads of a `self_attention`): a layer is folded whole or not at all."""
        if start + k >= len(self.body) or not isinstance(self.body[start + k], Assign):
            return False
        layers = {identifier(x) for x in self._layers(self.body[start : start + k])}
        return any(t == v or t.startswith(v + "_") for t in self.body[start + k].targets for v in layers)

    def _class_name(self, prefix: str) -> str:
        words = [w for w in re.split(r"[^A-Za-z0-9]+", prefix) if w]
        base = "".join(w[:1].upper() + w[1:] for w in words) or "Layers"
        if not base.lower().endswith("block"):
            base += "Block"
        if base[0].isdigit():
            base = "L" + base
        cls, i = base, 2
        while cls in self.used:
            cls, i = f"{base}{i}", i + 1
        return cls

    def _layers(self, stmts: list[Assign]) -> list[str]:
        """The original layers the group's statements compute (those of the net dict)."""
        out: list[str] = []
        for s in stmts:
            named = re.match(r"layer '([^']*)'", s.comment or "")
            for cand in ([named.group(1)] if named else []) + list(s.targets):
                if cand in self.layers and cand not in out:
                    out.append(cand)
        return out


class _Refound(Exception):
    pass


def fold(body: list, outputs: list, inputs: list[str], dims: set[str], used: set[str], layers: set[str]):
    """The body with repeated stacks folded, and the classes it uses."""
    f = Folder(body, outputs, inputs, dims, used, layers)
    for _ in range(100):  # each fold replaces statements by calls, which fold no further
        try:
            f.run()
            break
        except _Refound:
            continue
    return f.body, f.classes

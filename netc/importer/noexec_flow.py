"""Which statements of a config `netc import --no-exec` evaluates: a backward liveness analysis
over the module's statements from the names the importer reads (`network`, `extern_data`, ...).

A statement is evaluated when it binds a name that is read later, or may change an object that a
name read later may share (`network["x"] = ...`, `network.update(...)`, `f(network)`, a call of a
function of the config that mentions the name); everything else (datasets, learning rates, unused
functions and imports) is skipped, never evaluated. Sharing is approximated by classes of names
that one statement puts into another's value (`net = {"unit": unit}`), names only ever bound to
numbers and strings excepted."""

from __future__ import annotations

import ast
from collections.abc import Iterable

# calls that change none of their arguments
PURE_CALLS = frozenset(
    "range len enumerate zip dict list tuple int float str bool min max sum abs sorted reversed round any all "
    "print isinstance Dim FeatureDim SpatialDim".split()
)
# RETURNN's `config` methods that only read (others, as `config.set`, bind names: anything may change)
CONFIG_READS = frozenset(
    "value int float bool typed_value opt_typed_value has is_true is_typed bool_or_other list int_list float_list".split()
)
# calls that read or bind names a liveness analysis cannot see
WILD_CALLS = frozenset({"locals", "globals", "vars", "exec", "eval", "setattr", "delattr", "__import__"})


def base_name(node: ast.AST) -> str | None:
    """`x` of `x`, `x[k]`, `x.a`, `x[k].a(...)`."""
    while isinstance(node, ast.Subscript | ast.Attribute | ast.Call | ast.Starred):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _walk_scope(node: ast.AST) -> Iterable[ast.AST]:
    """The nodes of a statement in its own scope: not into bodies of functions, lambdas, classes."""
    todo = [node]
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            todo.extend(n.decorator_list)
            if not isinstance(n, ast.ClassDef):
                todo.extend(n.args.defaults + [d for d in n.args.kw_defaults if d])
            else:
                todo.extend(n.bases + [k.value for k in n.keywords])
            continue
        if isinstance(n, ast.Lambda):
            todo.extend(n.args.defaults + [d for d in n.args.kw_defaults if d])
            continue
        todo.extend(ast.iter_child_nodes(n))


def reads(node: ast.AST) -> set[str]:
    """Names a statement or expression reads, `config.value("x", ...)` reading `x`."""
    out = set()
    for n in _walk_scope(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.Call) and _config_key(n):
            out.add(_config_key(n))
        elif isinstance(n, ast.AugAssign | ast.Delete):
            out |= {b for t in getattr(n, "targets", [getattr(n, "target", None)]) if (b := base_name(t))}
    return out


def _config_key(call: ast.Call) -> str | None:
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "config" and call.args:
        key = call.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value
    return None


def _target_names(t: ast.AST) -> set[str]:
    if isinstance(t, ast.Name):
        return {t.id}
    if isinstance(t, ast.Tuple | ast.List):
        return set().union(*(_target_names(e) for e in t.elts))
    if isinstance(t, ast.Starred):
        return _target_names(t.value)
    return set()


class Flow:
    """The liveness analysis of one module: `block(stmts, live_out)` gives which statements run."""

    def __init__(self, tree: ast.Module):
        self.defs: dict[str, set[str]] = {}  # a function/class/lambda of the config -> names its body mentions
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.defs.setdefault(node.name, set()).update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Lambda):
                for t in node.targets:
                    for name in _target_names(t):
                        self.defs.setdefault(name, set()).update(
                            n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)
                        )
        changed = True
        while changed:  # a function that calls another mentions what that one mentions
            changed = False
            for name, names in self.defs.items():
                more = set().union(*(self.defs[n] for n in names if n in self.defs and n != name)) - names
                if more:
                    names |= more
                    changed = True
        self.scalars = self._scalars(tree)
        self.parent: dict[str, str] = {}
        for node in ast.walk(tree):
            self._alias(node)
        self.masks: dict[int, list[bool]] = {}  # id of a statement list -> which of its statements run

    # -- sharing ---------------------------------------------------------------------------------

    def _find(self, x: str) -> str:
        while self.parent.get(x, x) != x:
            x = self.parent[x]
        return x

    def _union(self, names: set[str]) -> None:
        names = {n for n in names if n not in self.scalars}
        roots = sorted({self._find(n) for n in names})
        for r in roots[1:]:
            self.parent[r] = roots[0]

    def _alias(self, node: ast.AST) -> None:
        """Names one statement may make share objects: its targets and the names in its value."""
        if isinstance(node, ast.Assign):
            self._union({b for t in node.targets if (b := base_name(t))} | _shared(node.value))
        elif isinstance(node, ast.AugAssign | ast.AnnAssign) and node.value is not None:
            self._union({base_name(node.target)} - {None} | _shared(node.value))
        elif isinstance(node, ast.For | ast.comprehension):
            self._union(_target_names(node.target) | _shared(node.iter))
        elif isinstance(node, ast.Call):
            # `x.update(y)`, `x.append(y)`, `f(x, y)`: x and y may share afterwards
            names = set().union(*(_shared(a) for a in node.args), *(_shared(k.value) for k in node.keywords))
            if isinstance(node.func, ast.Attribute):
                names |= {base_name(node.func)} - {None}
            self._union(names)

    def _scalars(self, tree: ast.Module) -> set[str]:
        """Names only ever bound to numbers, strings, bools, None (or tuples of them): never shared."""
        bound: dict[str, list[ast.AST | None]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        bound.setdefault(t.id, []).append(node.value)
                    elif isinstance(t, ast.Tuple | ast.List) and isinstance(node.value, ast.Tuple | ast.List):
                        if len(t.elts) == len(node.value.elts):
                            for e, v in zip(t.elts, node.value.elts):
                                for name in _target_names(e):
                                    bound.setdefault(name, []).append(v if isinstance(e, ast.Name) else None)
                            continue
                        for name in _target_names(t):
                            bound.setdefault(name, []).append(None)
                    else:
                        for name in _target_names(t):
                            bound.setdefault(name, []).append(None)
        # names bound other than by a plain assignment are not scalars
        other = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.For | ast.comprehension | ast.AugAssign | ast.AnnAssign | ast.NamedExpr):
                other |= _target_names(node.target)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                other.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                other |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                other |= _target_names(node.optional_vars)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                other.add(node.name)
        scalars = {n for n, values in bound.items() if n not in other and values and None not in values}
        changed = True
        while changed:
            changed = False
            for n in list(scalars):
                if not all(_scalar_expr(v, scalars) for v in bound[n]):
                    scalars.discard(n)
                    changed = True
        return scalars

    # -- liveness --------------------------------------------------------------------------------

    def share(self, live: set[str]) -> set[str]:
        """The names that may share an object with a live name."""
        roots = {self._find(n) for n in live}
        return set(live) | roots | {n for n in self.parent if self._find(n) in roots}

    def block(self, stmts: list[ast.stmt], out: set[str]) -> tuple[bool, set[str]]:
        """Whether any statement of `stmts` runs for data, and the names live before them."""
        live = set(out)
        mask = [False] * len(stmts)
        any_data = False
        for i in range(len(stmts) - 1, -1, -1):
            data, ctrl, live_in = self.stmt(stmts[i], live)
            if data or ctrl:
                mask[i] = True
                live = live_in
            any_data |= data
        self.masks[id(stmts)] = mask
        return any_data, live

    def stmt(self, s: ast.stmt, out: set[str]) -> tuple[bool, bool, set[str]]:
        """(runs for data, is `break`/`continue` of a loop that runs, the names live before it)."""
        if isinstance(s, ast.Break | ast.Continue):
            return False, True, set(out)
        if isinstance(s, ast.If):
            d1, l1 = self.block(s.body, out)
            d2, l2 = self.block(s.orelse, out)
            ctrl = any(self.masks[id(s.body)]) or any(self.masks[id(s.orelse)])
            if d1 or d2 or ctrl:
                return d1 or d2, not (d1 or d2) and ctrl, l1 | l2 | reads(s.test)
            return False, False, set(out)
        if isinstance(s, ast.For):
            targets = _target_names(s.target)
            head = set(out)
            while True:  # the live names at the loop's head: a fixed point
                data, body_in = self.block(s.body, head)
                _, else_in = self.block(s.orelse, out)
                new = head | else_in | (body_in - targets)
                if new == head:
                    break
                head = new
            if data or targets & out:
                return True, False, head | reads(s.iter) | else_in
            return False, False, set(out)
        binds, kills, changes, wild = _effects(s, self.defs)
        data = bool(binds & out) or bool(changes & self.share(out)) or (wild and bool(out))
        if not data:
            return False, False, set(out)
        return True, False, (out - kills) | reads(s)


def _shared(node: ast.AST | None) -> set[str]:
    """Names whose objects `node`'s value may hold (not through arithmetic, comparisons, tests)."""
    if node is None:
        return set()
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Compare | ast.JoinedStr | ast.Constant | ast.Lambda | ast.UnaryOp):
        return set()
    if isinstance(node, ast.IfExp):
        return _shared(node.body) | _shared(node.orelse)
    if isinstance(node, ast.Subscript):
        return _shared(node.value)
    if isinstance(node, ast.Dict):
        return set().union(*(_shared(v) for v in node.values))
    if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        elt = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        return set().union(*(_shared(e) for e in elt), *(_shared(g.iter) for g in node.generators))
    return set().union(*(_shared(c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)))


def _scalar_expr(node: ast.AST | None, scalars: set[str]) -> bool:
    if isinstance(node, ast.Constant | ast.JoinedStr | ast.Compare):
        return True
    if isinstance(node, ast.Name):
        return node.id in scalars
    if isinstance(node, ast.UnaryOp):
        return _scalar_expr(node.operand, scalars)
    if isinstance(node, ast.BinOp):
        return _scalar_expr(node.left, scalars) and _scalar_expr(node.right, scalars)
    if isinstance(node, ast.BoolOp):
        return all(_scalar_expr(v, scalars) for v in node.values)
    if isinstance(node, ast.IfExp):
        return _scalar_expr(node.body, scalars) and _scalar_expr(node.orelse, scalars)
    if isinstance(node, ast.Tuple):
        return all(_scalar_expr(e, scalars) for e in node.elts)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and base_name(node.func) == "config":
        return node.func.attr in {"value", "int", "float", "bool"}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in {"str", "int", "float", "bool", "len", "round", "abs"}
    return False


def _effects(s: ast.stmt, defs: dict[str, set[str]]) -> tuple[set[str], set[str], set[str], bool]:
    """(names it may bind, names it surely rebinds, names whose objects it may change, whether it
    may bind any name at all: `locals().update(...)`, `from x import *`, `config.set(...)`)."""
    binds, kills, changes, wild = set(), set(), set(), False
    if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        binds.add(s.name)
        kills.add(s.name)
    elif isinstance(s, ast.Import | ast.ImportFrom):
        for a in s.names:
            if a.name == "*":
                wild = True
            else:
                binds.add((a.asname or a.name).split(".")[0])
        kills |= binds
    elif isinstance(s, ast.Assign) and all(isinstance(t, ast.Name | ast.Tuple | ast.List) for t in s.targets):
        kills |= set().union(*(_target_names(t) for t in s.targets))
    elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None:
        kills.add(s.target.id)
    for n in _walk_scope(s):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
            binds.add(n.id)
        elif isinstance(n, ast.Subscript | ast.Attribute) and isinstance(n.ctx, ast.Store | ast.Del):
            changes |= {base_name(n)} - {None}
        elif isinstance(n, ast.AugAssign):
            changes |= {base_name(n.target)} - {None}
        elif isinstance(n, ast.Global | ast.Nonlocal):
            binds |= set(n.names)
        elif isinstance(n, ast.Call):
            f = n.func
            callee = f.id if isinstance(f, ast.Name) else None
            if callee in WILD_CALLS:
                wild = True
            if isinstance(f, ast.Attribute) and base_name(f) == "config":
                wild |= f.attr not in CONFIG_READS
                continue
            if isinstance(f, ast.Attribute):
                changes |= {base_name(f)} - {None}
            if callee not in PURE_CALLS:
                changes |= set().union(*(_shared(a) for a in n.args), *(_shared(k.value) for k in n.keywords))
            if callee in defs:
                changes |= defs[callee]
    # comprehension variables are their own scope's
    for n in _walk_scope(s):
        if isinstance(n, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            for g in n.generators:
                binds -= _target_names(g.target)
    return binds, kills, changes, wild

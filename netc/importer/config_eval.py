"""An `eval` layer that calls the config's own functions (RETURNN setups' SpecAugment:
`self.network.get_config().typed_value('transform')(source(0, as_data=True), network=self.network)`,
or `"eval": transform`) reduced to what it computes outside training, as an `eval` string of the
restricted language (`evals.py`).

The config's functions are read from its syntax (never run) and followed statement by statement:
`network.cond_on_train(f, g)` is `g()` (what RETURNN computes when not training: the masking `f`
is training only), `if` on a keyword argument takes its branch, TensorFlow calls on the source stay
calls (`tf.clip_by_value(source(0), -3.0, 3.0)`), and what the result does not depend on (the
training step, the masks' sizes) is never needed. A result that depends on something not
understood is a refusal naming it."""

from __future__ import annotations

import ast
import functools
import math
import operator
import re
from dataclasses import dataclass, field

_OBJECT_FUNCTION = re.compile(r"^<function (\w+) at ")
_MAX_DEPTH = 40


@dataclass
class Unknown:
    """A value not understood; `why` names it (it matters only where the result reads it)."""

    why: str


@dataclass
class _Tensor:
    code: str  # an expression of the restricted eval language


@dataclass
class _Data:
    code: str  # its placeholder


@dataclass
class _Obj:
    kind: str  # "source", "self", "network", "config", "tf", "getter" (a bound method)
    path: str = ""


@dataclass(eq=False)
class _Fn:
    node: ast.FunctionDef | ast.Lambda
    env: dict
    name: str


class _Return(Exception):
    def __init__(self, value):
        self.value = value


@dataclass
class ConfigEval:
    code: str | None  # the restricted eval string outside training; None: not understood
    why: str = ""  # what is not understood
    functions: list[tuple[str, int]] = field(default_factory=list)  # the config's functions it ran
    train_only: list[tuple[str, int]] = field(default_factory=list)  # of them, those with `cond_on_train`


def reads_config(code) -> bool:
    """Whether an `eval` (a string or the repr of a function) calls into the config."""
    if isinstance(code, dict) and isinstance(code.get("__object__"), str):
        return bool(_OBJECT_FUNCTION.match(code["__object__"]))
    return isinstance(code, str) and "self" in code and re.search(r"\bself\b", code) is not None


def config_eval(code, config_path: str, values: dict | None = None) -> ConfigEval:
    """What `code` (an eval string or a config function's `{"__object__": "<function f at ..>"}`)
    computes outside training; `values`: the config's names bound to plain numbers and strings as
    its run left them (a value set under an `if config.has(...)`, read with `config.float(...)`)."""
    ev = _Evaluator(_globals(config_path, values or {}))
    try:
        if isinstance(code, dict):
            fn = ev.globals.get(_OBJECT_FUNCTION.match(code["__object__"]).group(1))
            if not isinstance(fn, _Fn):
                return ConfigEval(None, f"{code['__object__']} is not a function of the config file")
            value = ev.call(fn, [], {"source": _Obj("source"), "self": _Obj("self")})
        else:
            value = ev.expr(ast.parse(code.strip(), mode="eval").body, {})
    except SyntaxError as e:
        return ConfigEval(None, f"not a Python expression ({e.msg})")
    except RecursionError:
        value = Unknown("functions calling each other too deep")
    if isinstance(value, _Data):
        value = _Tensor(value.code)
    if not isinstance(value, _Tensor):
        why = value.why if isinstance(value, Unknown) else f"a result that is not a tensor ({_describe(value)})"
        return ConfigEval(None, why, ev.functions, ev.train_only)
    return ConfigEval(value.code, "", ev.functions, ev.train_only)


@functools.lru_cache(maxsize=8)
def _parsed(path: str) -> ast.Module | None:
    try:
        with open(path, encoding="utf-8") as f:
            return ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return None


def _globals(path: str, values: dict) -> dict:
    """The config's top-level functions, its names bound to literals and those its run bound to
    plain values (`values`; others: unknown)."""
    tree = _parsed(path)
    env: dict = {k: v for k, v in values.items() if _plain(v)}
    for node in tree.body if tree else []:
        if isinstance(node, ast.FunctionDef):
            env[node.name] = _Fn(node, env, node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name) and t.id not in values:
                    try:
                        env[t.id] = ast.literal_eval(node.value)
                    except (ValueError, SyntaxError, TypeError):
                        env[t.id] = Unknown(f"the config's `{t.id}` (line {node.lineno}, not a literal)")
    return env


def _describe(v) -> str:
    if isinstance(v, _Obj):
        return {"source": "`source`", "self": "the layer", "network": "the network", "config": "the config"}.get(
            v.kind, f"`{v.path or v.kind}`"
        )
    if isinstance(v, _Fn):
        return f"the function `{v.name}`"
    return repr(v)


def _plain(v) -> bool:
    return v is None or isinstance(v, bool | int | float | str)


class _Evaluator:
    def __init__(self, config_globals: dict):
        self.globals = config_globals
        self.functions: list[tuple[str, int]] = []
        self.train_only: list[tuple[str, int]] = []
        self.stack: list[_Fn] = []

    # -- expressions

    def expr(self, node: ast.expr, env: dict):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.name(node.id, env)
        if isinstance(node, ast.Attribute):
            return self.attribute(self.expr(node.value, env), node.attr)
        if isinstance(node, ast.Call):
            fn = self.expr(node.func, env)
            args = [self.expr(a, env) for a in node.args if not isinstance(a, ast.Starred)]
            kwargs = {k.arg: self.expr(k.value, env) for k in node.keywords if k.arg}
            if any(isinstance(a, ast.Starred) for a in node.args) or any(not k.arg for k in node.keywords):
                return Unknown(f"`{ast.unparse(node)}` (`*args`/`**kwargs` in a call)")
            return self.call(fn, args, kwargs, node)
        if isinstance(node, ast.Lambda):
            return _Fn(node, env, "lambda")
        if isinstance(node, ast.BinOp):
            return self.binop(node, self.expr(node.left, env), self.expr(node.right, env))
        if isinstance(node, ast.UnaryOp):
            v = self.expr(node.operand, env)
            if isinstance(v, _Tensor) and isinstance(node.op, ast.USub | ast.UAdd):
                return _Tensor(ast.unparse(ast.UnaryOp(node.op, ast.parse(v.code, mode="eval").body)))
            return self.plain(node, lambda: _UNARY[type(node.op)](v), v)
        if isinstance(node, ast.Compare | ast.BoolOp):
            parts = [node.left, *node.comparators] if isinstance(node, ast.Compare) else node.values
            vals = [self.expr(p, env) for p in parts]
            if tensor := next((v for v in vals if isinstance(v, _Tensor | _Data)), None):
                if not any(isinstance(v, Unknown) for v in vals):
                    op = _TF_COMPARE.get(type(node.ops[0])) if isinstance(node, ast.Compare) else None
                    ok = op and len(node.ops) == 1 and all(isinstance(v, _Tensor | _Data | int | float) for v in vals)
                    if ok and not any(isinstance(v, bool) for v in vals):  # `a > b`: `tf.greater(a, b)`
                        return _Tensor(f"tf.{op}({_code(vals[0])}, {_code(vals[1])})")
                    return Unknown(f"`{ast.unparse(node)}` (a comparison of the tensor `{tensor.code}`)")
            return self.plain(node, lambda: _logic(node, vals), *vals)
        if isinstance(node, ast.IfExp):
            test = self.expr(node.test, env)
            if not _plain(test):
                return Unknown(f"`{ast.unparse(node)}` (a condition not known before running)")
            return self.expr(node.body if test else node.orelse, env)
        if isinstance(node, ast.Subscript):
            base, key = self.expr(node.value, env), self.expr(node.slice, env)
            if isinstance(base, dict) and _plain(key) and key in base:
                return base[key]
            if isinstance(base, _Obj) and base.kind == "typed_dict" and isinstance(key, str) and key in self.globals:
                return self.globals[key]  # `config.typed_dict['f']`: the config's own value
            if isinstance(base, _Tensor) and isinstance(key, int) and not isinstance(key, bool):
                return _Tensor(f"{base.code}[{key}]")  # `tf.shape(x)[-1]`: the eval language decides
            return Unknown(f"`{ast.unparse(node)}`")
        if isinstance(node, ast.Tuple | ast.List):
            return Unknown(f"`{ast.unparse(node)}` (a {type(node).__name__.lower()})")
        return Unknown(f"`{ast.unparse(node)}`")

    def plain(self, node: ast.expr, compute, *vals):
        """An operation of plain numbers (bools, None) computed; of anything else, unknown."""
        if bad := next((v for v in vals if isinstance(v, Unknown)), None):
            return bad
        if not all(_plain(v) for v in vals):
            return Unknown(f"`{ast.unparse(node)}`")
        try:
            return compute()
        except Exception:  # noqa: BLE001 - the config's own arithmetic failing: not known
            return Unknown(f"`{ast.unparse(node)}`")

    def binop(self, node: ast.BinOp, a, b):
        if isinstance(a, _Tensor | _Data) or isinstance(b, _Tensor | _Data):
            if isinstance(a, Unknown) or isinstance(b, Unknown):
                return a if isinstance(a, Unknown) else b
            if not all(isinstance(v, _Tensor | _Data) or isinstance(v, int | float) for v in (a, b)):
                return Unknown(f"`{ast.unparse(node)}`")
            left, right = (ast.parse(_code(v), mode="eval").body for v in (a, b))
            return _Tensor(ast.unparse(ast.BinOp(left, node.op, right)))
        return self.plain(node, lambda: _BINARY[type(node.op)](a, b), a, b)

    def name(self, ident: str, env: dict):
        """A name: the function's own or its closure's; the config's (in its functions: an `eval`
        string sees RETURNN's names, `source`, `self`, `tf`, not the config's)."""
        for scope in (env, self.globals) if self.stack else (env,):
            if ident in scope:
                return scope[ident]
        if ident == "tf":
            return _Obj("tf", "tf")
        if ident in ("source", "self"):
            return _Obj(ident)
        if ident == "safe_log":  # RETURNN's, which an `eval` string sees (`evals.py` maps it)
            return _Obj("tf", "safe_log")
        if ident in _BUILTINS:  # `-float("inf")`: a number
            return _BUILTINS[ident]
        return Unknown(f"`{ident}`")

    def attribute(self, base, attr: str):
        if isinstance(base, Unknown):
            return base
        if isinstance(base, _Data):
            if attr == "placeholder":
                return _Tensor(base.code)
            return Unknown(f"the source's `{attr}`")
        if isinstance(base, _Tensor):
            return Unknown(f"`.{attr}` of a tensor (`{base.code}`: a `source(i)` without `as_data=True`?)")
        if isinstance(base, _Obj):
            if base.kind == "self" and attr == "network":
                return _Obj("network")
            if base.kind == "network" and attr == "get_config":
                return _Obj("getter", "get_config")
            if base.kind == "network" and attr == "_config":
                return _Obj("config")
            if base.kind == "network" and attr == "cond_on_train":
                return _Obj("getter", "cond_on_train")
            if base.kind == "config" and attr in ("typed_value", "value", "float", "int", "bool"):
                return _Obj("getter", "typed_value")
            if base.kind == "config" and attr == "typed_dict":
                return _Obj("typed_dict")
            if base.kind == "typed_dict" and attr == "get":
                return _Obj("getter", "typed_value")
            if base.kind == "tf":
                return _Obj("tf", f"{base.path}.{attr}")
        return Unknown(f"`{attr}` of {_describe(base)}")

    def call(self, fn, args: list, kwargs: dict, node: ast.Call | None = None):
        shown = f"`{ast.unparse(node)}`" if node is not None else "a call"
        if isinstance(fn, Unknown):
            return fn
        if fn is None and node is not None and isinstance(node.func, ast.Call):
            return Unknown(f"{shown}: the config file defines no such function")
        if isinstance(fn, _Fn):
            return self.run_function(fn, args, kwargs)
        if any(fn is b for b in _BUILTINS.values()) and not kwargs and node is not None:
            return self.plain(node, lambda: fn(*args), *args)
        if not isinstance(fn, _Obj):
            return Unknown(shown)
        if fn.kind == "source":
            i = args[0] if args else kwargs.get("i")
            if not isinstance(i, int) or isinstance(i, bool) or set(kwargs) - {"i", "as_data", "auto_convert"}:
                return Unknown(shown)
            if kwargs.get("as_data"):
                return _Data(f"source({i})")
            # read in its own layout (what axis numbers of it name) as the call says
            return _Tensor(
                f"source({i}, auto_convert=False)" if kwargs.get("auto_convert") is False else f"source({i})"
            )
        if fn.kind == "getter" and fn.path == "get_config":
            return _Obj("config")
        if fn.kind == "getter" and fn.path == "typed_value":
            key = args[0] if args else None
            if not isinstance(key, str):
                return Unknown(shown)
            return self.globals.get(key, args[1] if len(args) > 1 else kwargs.get("default"))
        if fn.kind == "getter" and fn.path == "cond_on_train":
            if len(args) != 2:
                return Unknown(shown)
            owner = self.stack[-1] if self.stack else None
            if owner is not None and (owner.name, owner.node.lineno) not in self.train_only:
                self.train_only.append((owner.name, owner.node.lineno))
            return self.call(args[1], [], {})  # not training: the second branch
        if fn.kind == "tf":
            vals = [*args, *kwargs.values()]
            if bad := next((v for v in vals if isinstance(v, Unknown)), None):
                return bad
            if not all(isinstance(v, _Tensor | _Data | int | float) or _is_dtype(v) for v in vals):
                return Unknown(shown)
            if not any(isinstance(v, _Tensor | _Data) for v in vals):
                return Unknown(f"{shown} (TensorFlow of numbers only)")
            parts = [_code(a) for a in args] + [f"{k}={_code(v)}" for k, v in kwargs.items()]
            return _Tensor(f"{fn.path}({', '.join(parts)})")
        return Unknown(shown)

    # -- functions

    def run_function(self, fn: _Fn, args: list, kwargs: dict):
        if len(self.stack) > _MAX_DEPTH:
            return Unknown(f"the function `{fn.name}` calling itself")
        env: dict = {}
        a = fn.node.args
        positional = [*a.posonlyargs, *a.args]
        defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        for i, (p, default) in enumerate(zip(positional, defaults)):
            if i < len(args):
                env[p.arg] = args[i]
            elif p.arg in kwargs:
                env[p.arg] = kwargs.pop(p.arg)
            elif default is not None:
                env[p.arg] = self.expr(default, fn.env)
            else:
                return Unknown(f"the function `{fn.name}` called without its argument `{p.arg}`")
        for p, default in zip(a.kwonlyargs, a.kw_defaults):
            env[p.arg] = kwargs.pop(p.arg) if p.arg in kwargs else self.expr(default, fn.env) if default else None
        if a.vararg:
            env[a.vararg.arg] = Unknown(f"`*{a.vararg.arg}`")
        elif len(args) > len(positional):
            return Unknown(f"the function `{fn.name}` called with {len(args)} arguments")
        if a.kwarg:
            env[a.kwarg.arg] = dict(kwargs)
        elif kwargs:
            return Unknown(f"the function `{fn.name}` called with `{next(iter(kwargs))}=`")
        env = _Chain(env, fn.env)
        if isinstance(fn.node, ast.Lambda):
            return self.expr(fn.node.body, env)
        if fn.env is self.globals:
            self.functions.append((fn.name, fn.node.lineno))
        self.stack.append(fn)
        try:
            self.block(fn.node.body, env)
        except _Return as r:
            return r.value
        finally:
            self.stack.pop()
        return None

    def block(self, stmts: list[ast.stmt], env: dict) -> None:
        for s in stmts:
            self.statement(s, env)

    def statement(self, s: ast.stmt, env: dict) -> None:
        if isinstance(s, ast.Return):
            raise _Return(self.expr(s.value, env) if s.value is not None else None)
        if isinstance(s, ast.FunctionDef):
            env[s.name] = _Fn(s, env, s.name)
        elif isinstance(s, ast.Assign):
            value = self.expr(s.value, env)
            for t in s.targets:
                self.assign(t, value, env)
        elif isinstance(s, ast.AnnAssign) and s.value is not None:
            self.assign(s.target, self.expr(s.value, env), env)
        elif isinstance(s, ast.AugAssign):
            if isinstance(s.target, ast.Name):
                old = self.name(s.target.id, env)
                env[s.target.id] = self.binop(ast.BinOp(s.target, s.op, s.value), old, self.expr(s.value, env))
        elif isinstance(s, ast.Import | ast.ImportFrom):
            for alias in s.names:
                bound = alias.asname or alias.name.split(".")[0]
                module = (s.module or "") if isinstance(s, ast.ImportFrom) else alias.name
                is_tf = module.split(".")[0] == "tensorflow" or bound == "tf"
                env[bound] = _Obj("tf", "tf") if is_tf else Unknown(f"`{bound}` (imported from `{module}`)")
        elif isinstance(s, ast.If):
            test = self.expr(s.test, env)
            if _plain(test):
                self.block(s.body if test else s.orelse, env)
            else:
                self.either(s, test, env)
        elif isinstance(s, ast.For | ast.While | ast.AsyncFor):
            why = Unknown(f"a value a loop sets (line {s.lineno})")
            for n in ast.walk(s):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    env[n.id] = why
        elif isinstance(s, ast.With | ast.Try):
            self.block(s.body, env)
        # other statements (expressions, asserts, pass, prints) change no value the result reads

    def either(self, s: ast.If, test, env: dict) -> None:
        """An `if` whose condition is not known: each name either branch sets is unknown unless both
        set the same; a `return` in either is not known."""
        why = Unknown(f"`{ast.unparse(s.test)}` (line {s.lineno}), a condition not known before running")
        results = []
        for branch in (s.body, s.orelse):
            local = _Chain({}, env)
            try:
                self.block(branch, local)
            except _Return:
                raise _Return(why) from None
            results.append(local.own)
        for key in set(results[0]) | set(results[1]):
            a, b = (r.get(key, env.get(key)) for r in results)
            env[key] = a if _same(a, b) else why

    def assign(self, target: ast.expr, value, env: dict) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        else:
            for n in ast.walk(target):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    env[n.id] = Unknown(f"`{ast.unparse(target)}`")


class _Chain(dict):
    """A function's local names over its closure (names it sets are its own)."""

    def __init__(self, own: dict, outer: dict):
        super().__init__()
        self.own, self.outer = own, outer

    def __contains__(self, key) -> bool:
        return key in self.own or key in self.outer

    def __getitem__(self, key):
        return self.own[key] if key in self.own else self.outer[key]

    def __setitem__(self, key, value) -> None:
        self.own[key] = value

    def get(self, key, default=None):
        return self[key] if key in self else default


def _same(a, b) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    return (isinstance(a, _Tensor | _Data) or _plain(a)) and a == b


def _code(v) -> str:
    if _is_dtype(v):
        return v.path
    if isinstance(v, float) and math.isinf(v):  # `repr` gives `-inf`, a name
        return f"float({str(v)!r})"
    return v.code if isinstance(v, _Tensor | _Data) else repr(v)


def _is_dtype(v) -> bool:
    """`tf.int32`, `tf.float32`: a dtype argument of a TensorFlow call (`output_type=tf.int32`)."""
    return isinstance(v, _Obj) and v.kind == "tf" and v.path in _DTYPES


_DTYPES = {"tf.float32", "tf.int32", "tf.int64", "tf.bool"}
# builtins of numbers a config's function calls (`-float("inf")`)
_BUILTINS = {"float": float, "int": int}


_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
# a comparison of tensors as the eval language writes it (TF's function)
_TF_COMPARE = {
    ast.Gt: "greater",
    ast.GtE: "greater_equal",
    ast.Lt: "less",
    ast.LtE: "less_equal",
    ast.Eq: "equal",
    ast.NotEq: "not_equal",
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}


def _logic(node: ast.Compare | ast.BoolOp, vals: list):
    """A comparison chain or `and`/`or` of plain values (an operator not in the tables: KeyError)."""
    if isinstance(node, ast.BoolOp):
        for v in vals[:-1]:
            if bool(v) == isinstance(node.op, ast.Or):
                return v
        return vals[-1]
    return all(_COMPARE[type(op)](a, b) for op, a, b in zip(node.ops, vals, vals[1:]))

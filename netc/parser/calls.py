"""The tracer's calls: builtins, netc's ops and DSL names, `Module` construction and methods,
and inlining of helper functions (a mixin of `Tracer`, split from it for size: `self` is the
tracer)."""

from __future__ import annotations

import ast
from typing import Any

from netc.ir.dims import DimError
from netc.ir.model import Output
from netc.ops import BY_FN_NAME, ITERABLES, REGISTRY, OpDef
from netc.ops.base import signature
from netc.parser import values as V
from netc.parser.ctc import trace_ctc_prefix_search
from netc.parser.iterables import rules
from netc.parser.symbols import describe, dim_args, loss_args
from netc.parser.transducer import trace_transducer_search


class Calls:
    def call_args(self, node: ast.Call) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword arguments, evaluated in source order (`f(k=a, *b)` is legal)."""
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for a in sorted([*node.args, *node.keywords], key=lambda a: (a.lineno, a.col_offset)):
            if isinstance(a, ast.keyword):
                if a.arg is None:
                    raise self.error(a, "`**` arguments are not supported")
                kwargs[a.arg] = self.eval_expr(a.value)
            elif isinstance(a, ast.Starred):
                v = self.eval_expr(a.value)
                if not isinstance(v, (tuple, list)):
                    raise self.error(a, "`*` needs a tuple or list")
                args.extend(v)
            else:
                args.append(self.eval_expr(a))
        return args, kwargs

    def call(self, node: ast.Call) -> Any:
        fn = self.eval_expr(node.func)
        if isinstance(fn, V.Builtin) and fn.name in ("range", "zip", "reversed"):
            return self.loops.iter_builtin(fn.name, node)
        if isinstance(fn, V.NetcSym) and fn.name == "unstack":
            return self.loops.unstack(node)
        if isinstance(fn, V.NetcSym) and fn.name in ITERABLES:  # a loop kind's iterable
            return rules(fn.name).call(self, node)
        if isinstance(fn, V.NetcSym) and fn.name == "choice":
            return self.loops.choice(node)
        if isinstance(fn, V.NetcSym) and fn.name == "transducer_search":
            return trace_transducer_search(self, node)
        if isinstance(fn, V.NetcSym) and fn.name == "ctc_prefix_search":
            return trace_ctc_prefix_search(self, node)
        args, kwargs = self.call_args(node)
        return self.call_value(fn, args, kwargs, node)

    def call_value(self, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.Call) -> Any:
        """A call of the callable value `fn`."""
        if isinstance(fn, V.NetcSym):
            return self.call_netc(fn.name, args, kwargs, node)
        if isinstance(fn, V.OpModule):
            return self.call_op_module(fn, args, kwargs, node)
        if isinstance(fn, V.FunctionRef):
            return self.inline(fn.node, args, kwargs, node, self_obj=None, scope=self.helper_scope(fn.node.name))
        if isinstance(fn, V.ClassRef):
            return self.construct(fn, args, kwargs, node)
        if isinstance(fn, V.ModuleInstance):
            return self.call_method(fn, "__call__", args, kwargs, node)
        if isinstance(fn, V.BoundMethod):
            if isinstance(fn.obj, V.PyList):
                if len(args) != 1 or kwargs:
                    raise self.error(node, "append takes one value")
                self.loops.append(fn.obj, args[0], node)
                return None
            return self.call_method(fn.obj, fn.name, args, kwargs, node)
        if isinstance(fn, V.Builtin):
            return self.call_builtin(fn.name, args, kwargs, node)
        if isinstance(fn, V.Foreign):
            raise self.error(
                node,
                f"`{fn.name}` is not part of the netc language; networks may only call netc ops, helper functions and Modules",
            )
        raise self.error(node, f"{describe(fn)} is not callable")

    def call_builtin(self, name: str, args, kwargs, node) -> Any:
        if name == "noop":
            return None
        if name == "super":
            return V.Super()
        if name == "print":
            return None  # printing is for eager runs; compiled code has nothing to show
        if name == "len" and len(args) == 1 and isinstance(args[0], (tuple, list)):
            return len(args[0])
        if name in ("abs", "round") and len(args) == 1 and not kwargs:
            # `abs(x)`, `round(x)` on a tensor are netc's ops (eagerly, `ETensor.__abs__`, `__round__`)
            if isinstance(args[0], V.TV):
                return self.call_netc(name, args, {}, node)
            if isinstance(args[0], (int, float)):
                return abs(args[0]) if name == "abs" else round(args[0])
        if name in ("float", "int") and len(args) == 1 and isinstance(args[0], (int, float)):
            return self.budget.number(float(args[0]) if name == "float" else int(args[0]), node)
        if name in ("tuple", "list") and len(args) == 1 and isinstance(args[0], (tuple, list)):
            return tuple(args[0]) if name == "tuple" else list(args[0])
        raise self.error(node, f"`{name}(...)` is not supported here")

    def call_netc(self, name: str, args, kwargs, node: ast.Call) -> Any:
        if name == "Dim":
            return self.declare_dim(args, kwargs, node)
        if name == "mark_as_loss":
            return self.mark_as_loss(args, kwargs, node)
        if name == "end":
            raise self.error(node, "`end(cond)` is only valid as `if end(cond): break` in a loop")
        if name == "stack":
            if len(args) == 1:
                self.loops.no_growing_list(args[0], node)
            if len(args) != 1 or kwargs or not (isinstance(args[0], V.TV) and args[0].from_list):
                raise self.error(node, "stack(ys) takes one list appended to in a loop")
            return V.TV(args[0].value, args[0].block)
        opdef = BY_FN_NAME.get(name)
        if opdef is None:
            raise self.error(node, f"`{name}` cannot be called in a network")
        if opdef.module:
            return self.construct_op_module(opdef, args, kwargs, node)
        try:
            tensors, attrs = opdef.bind(tuple(args), kwargs)
        except TypeError as e:
            raise self.error(node, f"bad arguments to `{name}`: {e}") from None
        tensors = [self.as_tensor(t, node, name) for t in tensors]
        attrs = {k: self.attr_value(v, node, name) for k, v in attrs.items()}
        outs = self.emit(opdef, tensors, attrs, node)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def as_tensor(self, v: Any, node, opname: str) -> V.TV:
        if isinstance(v, V.TV):
            return v
        self.loops.no_growing_list(v, node)
        raise self.error(node, f"`{opname}` expects a tensor, got {describe(v)}")

    def attr_value(self, v: Any, node, opname: str) -> Any:
        """Attributes in IR are plain data: dims by name."""
        if isinstance(v, V.DimRef):
            return v.name
        if isinstance(v, (list, tuple)):
            return [self.attr_value(x, node, opname) for x in v]
        if isinstance(v, (int, float, str, bool)) or v is None:
            return v
        raise self.error(node, f"bad argument to `{opname}`: {describe(v)}")

    def mark_as_loss(self, args, kwargs, node) -> None:
        try:
            value, name = loss_args(*args, **kwargs)
        except TypeError:
            raise self.error(node, 'use mark_as_loss(value, "name")') from None
        if not isinstance(value, V.TV) or not isinstance(name, str):
            raise self.error(node, 'use mark_as_loss(value, "name") with a tensor and a name')
        if self.block is not self.root:
            raise self.error(
                node, "mark_as_loss inside a loop: append the per-step values, mark the stacked tensor after the loop"
            )
        if "batch" not in value.dims or value.value.dtype != "float32":
            raise self.error(
                node, f"a loss is a float tensor with the batch dim, got {value.value.dtype}[{', '.join(value.dims)}]"
            )
        if name in {loss.name for loss in self.losses}:
            raise self.error(node, f"loss `{name}` is marked twice")
        self.losses.append(Output(name=name, value=value.value.id, span=self.span(node)))
        return None

    def declare_dim(self, args, kwargs, node) -> V.DimRef:
        try:
            name, size = dim_args(*args, **kwargs)
        except TypeError:
            raise self.error(node, "use Dim(name) or Dim(name, size)") from None
        try:
            return V.DimRef(self.dims.declare(name, size).name)
        except DimError as e:
            raise self.error(node, str(e)) from None

    def construct_op_module(self, opdef: OpDef, args, kwargs, node: ast.Call) -> V.OpModule:
        tied: dict[str, V.ParamRef] = {}
        for key, role in opdef.weights.items():  # `weight=emb.weight`: another module's parameter
            if key not in kwargs:
                continue
            ref = kwargs.pop(key)
            if not isinstance(ref, V.ParamRef):
                raise self.error(
                    node,
                    f"`{opdef.fn_name}(..., {key}=...)` takes another module's parameter, e.g. `emb.weight`, "
                    f"got {describe(ref)}",
                )
            tied[role] = ref
        try:
            bound = signature(opdef.ctor).bind(*args, **kwargs)
        except TypeError as e:
            raise self.error(node, f"bad arguments to `{opdef.fn_name}`: {e}") from None
        bound.apply_defaults()
        attrs = {k: self.attr_value(v, node, opdef.fn_name or opdef.name) for k, v in bound.arguments.items()}
        span = self.span(node)
        call_path = (*self.call_path, span.key())
        made = self.made_modules.get(call_path)
        if made is not None:  # run again (an unrolled range): the same module
            if made.attrs != attrs or made.tied != tied:
                raise self.error(
                    node,
                    f"`{opdef.fn_name}` is constructed here again with other arguments: one constructor call "
                    "is one module (its parameters); construct one per argument before the loop",
                )
            return made
        base = self.stmt_target or opdef.name
        path = self.namer.module_path(self.scope, base)
        mod = V.OpModule(op=opdef.name, attrs=attrs, path=path, call_path=call_path, tied=tied)
        self.made_modules[call_path] = mod
        return mod

    def call_op_module(self, mod: V.OpModule, args, kwargs, node) -> V.TV | tuple[V.TV, ...]:
        opdef = REGISTRY[mod.op]
        try:
            tensors, call_attrs = opdef.module_call(tuple(args), kwargs)
        except TypeError as e:
            raise self.error(node, str(e)) from None
        xs = [self.as_tensor(x, node, opdef.fn_name or opdef.name) for x in tensors]
        what = opdef.fn_name or opdef.name
        attrs = {**mod.attrs, **{k: self.attr_value(v, node, what) for k, v in call_attrs.items()}}
        outs = self.emit(opdef, xs, attrs, node, param=mod)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def helper_scope(self, fname: str) -> list[str]:
        return [*self.scope, self.namer.scope_name(self.scope, fname)]

    def construct(self, cls: V.ClassRef, args, kwargs, node: ast.Call) -> V.ModuleInstance:
        if not self._is_module_class(cls):
            raise self.error(node, f"class `{cls.node.name}` must derive from netc's Module")
        call_path = (*self.call_path, self.span(node).key())
        made = self.made_modules.get(call_path)
        if made is not None:  # run again (an unrolled range): the same module
            return made
        base = self.stmt_target or cls.node.name.lower()
        inst = V.ModuleInstance(cls=cls, path=self.namer.module_path(self.scope, base))
        self.made_modules[call_path] = inst
        init = cls.method("__init__")
        if init is not None:
            self.inline(init, args, kwargs, node, self_obj=inst, scope=inst.path.split("/"))
        elif args or kwargs:
            raise self.error(node, f"`{cls.node.name}` takes no arguments")
        return inst

    def _is_module_class(self, cls: V.ClassRef) -> bool:
        for b in cls.node.bases:
            v = self.eval_expr(b)
            if v == V.NetcSym("Module") or (isinstance(v, V.ClassRef) and self._is_module_class(v)):
                return True
        return False

    def call_method(self, inst: V.ModuleInstance, name: str, args, kwargs, node) -> Any:
        method = inst.cls.method(name)
        if method is None and name == "__call__":
            method = inst.cls.method("forward")
        if method is None:
            raise self.error(node, f"`{inst.cls.node.name}` has no method `{name}`")
        return self.inline(method, args, kwargs, node, self_obj=inst, scope=inst.path.split("/"))

    def inline(self, fn: ast.FunctionDef, args, kwargs, node, self_obj, scope: list[str]) -> Any:
        env: dict[str, Any] = {}
        a = fn.args
        positional = [*a.posonlyargs, *a.args]
        # (name, default) of each parameter; defaults belong to the last positional parameters
        defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        params = [(p.arg, d) for p, d in zip(positional, defaults)]
        if self_obj is not None:
            if not params:
                raise self.error(fn, "methods need a `self` parameter")
            env[params[0][0]] = self_obj
            params = params[1:]
        if a.vararg or a.kwarg:
            raise self.error(a.vararg or a.kwarg, "`*args` / `**kwargs` are not supported")
        n_positional = len(params)
        params += [(p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
        if len(args) > n_positional:
            raise self.error(node, f"`{fn.name}` takes {len(params)} arguments, got {len(args)}")
        for (name, _), v in zip(params, args):
            self.bind(env, name, v)
        for k, v in kwargs.items():
            if k in env or k not in [name for name, _ in params]:
                raise self.error(node, f"`{fn.name}` got an unexpected or repeated argument `{k}`")
            self.bind(env, k, v)
        for name, default in params:
            if name not in env:
                if default is None:
                    raise self.error(node, f"`{fn.name}` is missing argument `{name}`")
                self.bind(env, name, self.eval_expr(default))
        self.budget.call(node, len(self.call_path) + 1)
        self.local_stack.append(env)
        saved = (self.scope, self.call_path, self.stmt_target)
        self.scope, self.call_path = scope, [*self.call_path, self.span(node).key()]
        self.stmt_target = None  # the caller's assignment does not name modules inside the callee
        try:
            self.run_body(fn.body)
            return None
        except V.Return as r:
            return r.value
        finally:
            self.scope, self.call_path, self.stmt_target = saved
            self.local_stack.pop()

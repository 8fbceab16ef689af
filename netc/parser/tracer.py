"""Symbolic evaluation of a model file's syntax tree into IR.

The parser is the only place that knows Python syntax. It walks the `@network`
function statement by statement, keeps an environment of what each name stands for,
inlines helper functions and `Module` methods, and appends IR nodes to the current
block. Loops become `Loop` regions (see `loops.py`).
"""

from __future__ import annotations

import ast
from typing import Any

from netc.errors import CompileError, Span
from netc.ir.dims import DimError, DimTable
from netc.ir.interface import check_interface
from netc.ir.model import Graph, Input, Op, Output, ParamDef, Value
from netc.naming import mangled
from netc.ops import BY_FN_NAME, REGISTRY, OpDef
from netc.ops.base import signature
from netc.parser import values as V
from netc.parser.budget import Budget
from netc.parser.grow import check_growing
from netc.parser.loops import LoopBuilder
from netc.parser.names import Namer
from netc.parser.source import Source, read_source
from netc.suggest import did_you_mean, listing

# names `from netc import ...` may bring in that are not ops
DSL_SYMBOLS = {
    "Dim",
    "batch",
    "Tensor",
    "Labels",
    "network",
    "Module",
    "unstack",
    "stack",
    "mark_as_loss",
    "end",
    "choice",
}
_NETC_NAMES = DSL_SYMBOLS | set(BY_FN_NAME)
BUILTINS = {"range", "zip", "reversed", "super", "print", "len", "float", "int", "tuple", "list", "abs"}
_BINOPS = {
    ast.Add: ("add", lambda a, b: a + b),
    ast.Sub: ("sub", lambda a, b: a - b),
    ast.Mult: ("mul", lambda a, b: a * b),
    ast.Div: ("div", lambda a, b: a / b),
    ast.Pow: ("pow", lambda a, b: a**b),
}


_COMPARE = {
    ast.Eq: "eq",
    ast.NotEq: "ne",
    ast.Lt: "lt",
    ast.LtE: "le",
    ast.Gt: "gt",
    ast.GtE: "ge",
}
_PY_COMPARE = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.Gt: lambda a, b: a > b,
    ast.LtE: lambda a, b: a <= b,
    ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}


class Tracer:
    def __init__(self, source: Source):
        self.path = source.path
        self.source = source
        self.module = source.parse()
        self.dims = DimTable()
        self.globals: dict[str, Any] = {name: V.Builtin(name) for name in BUILTINS}
        self.next_id = 0
        self.block = V.Block(nodes=[])
        self.root = self.block
        self.params: list[ParamDef] = []
        self.losses: list[Output] = []
        self.inputs: list[Input] = []  # the network's inputs (a `choice` target must be one)
        self.namer = Namer()
        self.call_path: list[tuple[int, int]] = []
        self.scope: list[str] = []  # module path prefix for parameters
        self.stmt_target: str | None = None  # the single Name a statement assigns, for naming
        self.loops = LoopBuilder(self)
        self.local_stack: list[dict[str, Any]] = [self.globals]
        self.tensor_if_depth = 0  # inside `if` on a tensor: both branches run, so no appends there
        self.budget = Budget(self.error)
        self.clock = 0

    def close(self) -> None:
        """Drop the helpers that refer back to the tracer: that reference cycle would keep the
        syntax tree and the environments alive until the next cyclic collection (for a large
        file, tens of MB that later stages then cannot reuse)."""
        del self.loops, self.budget

    # --- spans and errors --------------------------------------------------------------

    def span(self, node: ast.AST) -> Span:
        if isinstance(node, ast.arg):  # a parameter: its name (not its annotation and default)
            return self.source.node_span(node, len(node.arg.encode()))
        return self.source.node_span(node)

    def else_clause(self, stmt: ast.For | ast.While) -> ast.AST:
        """A loop's `else:` clause, from the keyword to its last statement (the tree has no node
        for the clause itself; the keyword begins a line of its own)."""
        last = stmt.orelse[-1]
        for line in range(stmt.orelse[0].lineno, stmt.body[-1].end_lineno or 0, -1):
            text = self.source.lines[line - 1]
            rest = text.lstrip()
            if rest.startswith("else") and rest[4:].lstrip().startswith(":"):
                col = len(text) - len(rest)  # indentation: ASCII, so bytes are characters
                return ast.Pass(
                    lineno=line, col_offset=col, end_lineno=last.end_lineno, end_col_offset=last.end_col_offset
                )
        return stmt.orelse[0]

    def error(self, node: ast.AST, msg: str) -> CompileError:
        return CompileError(self.span(node), msg)

    # --- values ------------------------------------------------------------------------

    def new_value(self, dims, dtype="float32", name=None, sparse_dim=None) -> Value:
        self.next_id += 1
        return Value(id=self.next_id, dims=tuple(dims), dtype=dtype, name=name, sparse_dim=sparse_dim)

    def tick(self) -> int:
        """The tracer's clock: orders the making of lists and the opening of loops."""
        self.clock += 1
        return self.clock

    def bind(self, env: dict[str, Any], name: str, value: Any) -> None:
        if isinstance(value, V.PyList):  # a loop finds the names of the lists it stacks into
            value.names[name] = None
        env[name] = value

    def use(self, tv: V.TV, node: ast.AST) -> V.TV:
        """The value as seen from the current block (capturing outer values as invariants)."""
        return self.loops.capture(tv, self.block, node)

    def emit(
        self, opdef: OpDef, args: list[V.TV], attrs: dict, node: ast.AST, param: V.OpModule | None = None
    ) -> list[V.TV]:
        args = [self.use(a, node) for a in args]
        if opdef.makes_dims(attrs) and self.block is not self.root:
            raise self.error(node, f"`{opdef.fn_name}` makes a dim, which a loop body cannot: call it before the loop")
        if opdef.batch_statistics and self.block is not self.root:
            raise self.error(
                node,
                f"`{opdef.fn_name}` in a loop body: a step's batch holds sequences that already ended, whose frames "
                "would count in its statistics; call it on the whole sequence before or after the loop",
            )
        try:
            outs = opdef.infer(self.dims, [a.value for a in args], attrs)
            roles = opdef.params(self.dims, [a.value for a in args], attrs) if param is not None else {}
        except DimError as e:
            raise self.error(node, str(e)) from None
        if param is not None:
            if param.params is None:
                param.params = roles
                for role, dims in roles.items():
                    init = opdef.init_of(role, dims)
                    self.params.append(
                        ParamDef(
                            name=f"{param.path}/{role}",
                            path=param.path,
                            dims=dims,
                            call_path=param.call_path,
                            role=role,
                            init=init,
                        )
                    )
            elif param.params != roles:
                raise self.error(
                    node,
                    f"module `{param.path}` called on inputs of another shape than before (its parameters are shared)",
                )
        vals = [self.new_value(o.dims, o.dtype, sparse_dim=o.sparse_dim) for o in outs]
        self.budget.op(node)
        self.block.nodes.append(
            Op(
                op=opdef.name,
                args=[a.value.id for a in args],
                attrs=attrs,
                outs=vals,
                span=self.span(node),
                param=param.path if param else None,
            )
        )
        return [V.TV(v, self.block) for v in vals]

    # --- module level ------------------------------------------------------------------

    def trace(self, network: str | None = None) -> Graph:
        nets: list[ast.FunctionDef] = []
        for stmt in self.module.body:
            if isinstance(stmt, ast.FunctionDef) and self._is_network(stmt):
                nets.append(stmt)
                self.globals[stmt.name] = V.FunctionRef(stmt)
            else:
                self.module_stmt(stmt)
        names = [n.name for n in nets]
        if network is not None:
            nets = [n for n in nets if n.name == network]
        if not nets:
            message = "no @network function" + (f" named `{network}`" if network else "")
            if network is not None:
                message += did_you_mean(network, names) or listing("file's @network functions are", names)
            raise CompileError(None, message, file=self.path)
        if len(nets) > 1:
            raise self.error(
                nets[1], "several @network functions; pick one with --network NAME" + listing("choices are", names)
            )
        return self.trace_network(nets[0])

    def _is_network(self, fn: ast.FunctionDef) -> bool:
        for dec in fn.decorator_list:
            try:
                val = self.eval_expr(dec)
            except CompileError:
                continue
            if val == V.NetcSym("network"):
                return True
        return False

    def module_stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.ImportFrom):
            self.import_from(stmt)
        elif isinstance(stmt, ast.Import):
            self.import_(stmt)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            self.small_stmt(stmt)
        elif _is_string(stmt) or isinstance(stmt, ast.Pass):
            pass  # a docstring
        elif isinstance(stmt, ast.FunctionDef):
            self.globals[stmt.name] = V.FunctionRef(stmt)
        elif isinstance(stmt, ast.ClassDef):
            self.globals[stmt.name] = V.ClassRef(stmt)
        elif isinstance(stmt, ast.If) and self._is_main_guard(stmt.test):
            pass  # `if __name__ == "__main__":` is eager-only code
        elif isinstance(stmt, _SIMPLE_STATEMENTS):
            raise self.error(stmt, "only imports, dims and constants are supported at module level")
        else:
            raise self.error(stmt, f"unsupported statement at module level: {_stmt_kind(stmt)}")

    @staticmethod
    def _is_main_guard(test: ast.expr) -> bool:
        return isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"

    def import_from(self, node: ast.ImportFrom) -> None:
        mod = "." * node.level + (node.module or "")
        if mod == "__future__":
            return
        if any(alias.name == "*" for alias in node.names):
            raise self.error(node, "`import *` is not supported; import names explicitly")
        for alias in node.names:
            name = alias.name
            as_name = alias.asname or name
            if mod == "netc":
                if name not in DSL_SYMBOLS and name not in BY_FN_NAME:
                    raise self.error(alias, f"`netc` has no `{name}`" + did_you_mean(name, _NETC_NAMES))
                self.globals[as_name] = _netc_symbol(name)
            else:
                self.globals[as_name] = V.Foreign(f"{mod}.{name}")

    def import_(self, node: ast.Import) -> None:
        for alias in node.names:
            name = alias.name
            as_name = alias.asname or name.split(".")[0]
            self.globals[as_name] = V.NetcModule() if name == "netc" else V.Foreign(name)

    # --- the network function ----------------------------------------------------------

    def trace_network(self, fn: ast.FunctionDef) -> Graph:
        env: dict[str, Any] = {}
        inputs: list[Input] = self.inputs
        a = fn.args
        odd = [*a.posonlyargs, *([a.vararg] if a.vararg else []), *a.kwonlyargs, *([a.kwarg] if a.kwarg else [])]
        if odd:
            raise self.error(odd[0], "network inputs must be plain parameters")
        for p in a.args:
            name = p.arg
            if p.annotation is None:
                raise self.error(p, f"network input `{name}` needs an annotation such as Tensor[batch, time, feat]")
            if name == "self":  # `model(self=x)` cannot work: nn.Module.__call__ takes `self` itself
                raise self.error(p, "a network input cannot be named `self`: the model could not be called with it")
            if mangled(name):
                raise self.error(
                    p,
                    f"a network input cannot be named `{name}`: Python mangles a leading `__` inside the torch "
                    "module's class, so the model could not be called with it; rename it",
                )
            kind, dims = self.input_annotation(p.annotation)
            canon = self.dims.canonical(dims)
            if kind == "Labels":
                sparse = dims[-1]
                dims = dims[:-1]
                canon = self.dims.canonical(dims)
                val = self.new_value(canon, "int32", name=name, sparse_dim=sparse)
            else:
                val = self.new_value(canon, "float32", name=name)
            inputs.append(Input(name=name, value=val, annotated_dims=tuple(dims), span=self.span(p)))
            for d in self.dims.dynamic(tuple(dims)):
                self.dims.lengths_known(d)
            env[name] = V.TV(val, self.root)
        self.local_stack.append(env)
        try:
            self.run_body(fn.body)
            raise self.error(fn, "the network function must end with `return`")
        except V.Return as r:
            outputs = self.network_outputs(r.node, r.value)
        finally:
            self.local_stack.pop()
        g = Graph(
            source_file=self.path,
            network=fn.name,
            dims=self.dims.as_list(),
            inputs=inputs,
            params=self.params,
            body=self.root.nodes,
            outputs=outputs,
            losses=self.losses,
        )
        check_interface(g)
        check_growing(g)
        return g

    def input_annotation(self, ann: ast.expr) -> tuple[str, list[str]]:
        if isinstance(ann, ast.Subscript):
            kind = self.eval_expr(ann.value)
            if kind in (V.NetcSym("Tensor"), V.NetcSym("Labels")):
                dims = []
                for el in ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]:
                    d = None if isinstance(el, (ast.Slice, ast.Starred)) else self.eval_expr(el)
                    if not isinstance(d, V.DimRef):
                        raise self.error(el, "annotation entries must be dims")
                    dims.append(d.name)
                if len(set(dims)) != len(dims):
                    raise self.error(ann, "a dim appears twice in the annotation")
                if "batch" not in dims:
                    raise self.error(ann, "network inputs need the `batch` dim")
                if kind.name == "Labels" and (len(dims) < 2 or self.dims[dims[-1]].kind != "static"):
                    raise self.error(ann, "Labels[...] ends with its class dim, e.g. Labels[batch, time, vocab]")
                return kind.name, dims
        raise self.error(ann, "network inputs are annotated Tensor[...] or Labels[...]")

    def network_outputs(self, node: ast.AST, value: Any) -> list[Output]:
        items = value.items() if isinstance(value, dict) else [("output", value)]
        outs = []
        for name, v in items:
            if not isinstance(name, str):
                raise self.error(node, f"output names are strings, got {_describe(name)}")
            if not isinstance(v, V.TV):
                raise self.error(node, f"output `{name}` is not a tensor")
            v = self.use(v, node)
            if "batch" not in v.dims:  # `training()`: one value for the whole batch
                raise self.error(
                    node,
                    f"output `{name}` has no `batch` dim; outputs are per sequence (select per-sequence values with it: `where(training(), a, b)`)",
                )
            if v.value.name is None:
                v.value.name = name
            outs.append(Output(name=name, value=v.value.id, span=self.span(node)))
        if not outs:
            raise self.error(node, "the network returns no outputs")
        return outs

    # --- statements --------------------------------------------------------------------

    @property
    def env(self) -> dict[str, Any]:
        return self.local_stack[-1]

    def run_body(self, stmts) -> None:
        for stmt in stmts:
            self.stmt(stmt)

    def stmt(self, stmt: ast.AST) -> None:
        self.budget.enter(stmt)
        try:
            self._stmt(stmt)
        finally:
            self.budget.leave()

    def _stmt(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, _SIMPLE_STATEMENTS):
            self.small_stmt(stmt)
        elif isinstance(stmt, ast.For):
            self.loops.for_loop(stmt)
        elif isinstance(stmt, ast.While):
            self.loops.while_loop(stmt)
        elif isinstance(stmt, ast.If):
            self.if_stmt(stmt)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            raise self.error(stmt, "define functions and classes at module level")
        else:
            raise self.error(stmt, f"{_stmt_kind(stmt)} is not supported in a network")

    def if_stmt(self, node: ast.If) -> None:
        if self.loops.end_break(node):
            return
        cond = self.eval_expr(node.test)
        if isinstance(cond, V.TV):
            self.tensor_if(node, cond)
            return
        if not isinstance(cond, (bool, int, float, str, type(None))):
            raise self.error(node.test, "`if` needs a condition known at compile time")
        self.run_body(node.body if cond else node.orelse)  # an `elif` is an `if` in the else branch

    def tensor_if(self, node: ast.If, cond: V.TV) -> None:
        """`if` on one bool per sequence: both branches run, each variable then takes its value
        from the branch each sequence chose (RETURNN `switch`, torch `where`)."""
        if cond.value.dtype != "bool" or not set(cond.dims) <= {"batch"}:
            raise self.error(
                node.test,
                f"`if` on a tensor needs one bool per sequence (dims within [batch]), got "
                f"{cond.value.dtype}[{', '.join(cond.dims)}]",
            )
        env = self.env
        before = dict(env)
        branches = []
        self.tensor_if_depth += 1
        try:
            for body in (node.body, node.orelse):
                env.clear()
                env.update(before)
                self.run_body(body)
                branches.append(dict(env))
        except V.Return as r:  # both branches run: the return would be taken whatever the condition
            raise self.error(
                r.node, "`return` inside an `if` on a tensor; assign a variable and return after the `if`"
            ) from None
        finally:
            self.tensor_if_depth -= 1
        env.clear()
        env.update(before)
        then, other = branches
        for name in dict.fromkeys([*then, *other]):
            a, b = then.get(name, _MISSING), other.get(name, _MISSING)
            if a is b:
                env[name] = a
            elif a is _MISSING or b is _MISSING:
                env[name] = V.Poison(name, self.span(node).line)
            elif isinstance(a, V.TV) and isinstance(b, V.TV):
                self.stmt_target = name
                try:
                    merged = self.emit(REGISTRY["where"], [cond, a, b], {}, node)[0]
                finally:
                    self.stmt_target = None
                merged.value.name = merged.value.name or name
                env[name] = merged
            else:
                raise self.error(node, f"`{name}` gets different Python values in the branches of an `if` on a tensor")

    def small_stmt(self, small: ast.stmt) -> None:
        if isinstance(small, ast.Assign):
            target = small.targets[0] if len(small.targets) == 1 else None
            self.stmt_target = target.id if isinstance(target, ast.Name) else None
            if isinstance(target, ast.Attribute):
                self.stmt_target = target.attr
            try:
                value = self.eval_expr(small.value)
            finally:
                self.stmt_target = None
            for t in small.targets:
                self.assign(t, value)
        elif isinstance(small, ast.AnnAssign):
            if small.value is None:
                raise self.error(small, "annotation without a value")
            self.assign(small.target, self.eval_expr(small.value))
        elif isinstance(small, ast.AugAssign):
            if type(small.op) not in _BINOPS:
                raise self.error(small, "unsupported augmented assignment")
            left = self.eval_expr(small.target)
            self.stmt_target = small.target.id if isinstance(small.target, ast.Name) else None
            try:
                value = self.binop(small.op, left, self.eval_expr(small.value), small)
            finally:
                self.stmt_target = None
            self.assign(small.target, value)
        elif isinstance(small, ast.Expr):
            if not _is_string(small):
                self.stmt_target = _appended_to(small.value)  # `ys.append(Linear(...)(h))` names it `ys`
                try:
                    self.eval_expr(small.value)
                finally:
                    self.stmt_target = None
        elif isinstance(small, ast.Return):
            raise V.Return(self.eval_expr(small.value) if small.value else None, small)
        elif isinstance(small, ast.Pass):
            pass
        else:
            raise self.error(small, f"{_stmt_kind(small)} is not supported in a network")

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            if isinstance(value, V.TV) and value.value.name is None:
                value.value.name = target.id
            self.bind(self.env, target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = value if isinstance(value, (tuple, list)) else None
            if any(isinstance(el, ast.Starred) for el in target.elts):
                raise self.error(target, "starred assignment targets are not supported")
            if items is None or len(items) != len(target.elts):
                n = len(items) if items is not None else "a non-sequence"
                raise self.error(target, f"cannot unpack {n} into {len(target.elts)} names")
            for el, v in zip(target.elts, items):
                self.assign(el, v)
        elif isinstance(target, ast.Attribute):
            obj = self.eval_expr(target.value)
            if not isinstance(obj, V.ModuleInstance):
                raise self.error(target, "only `self.<name> = ...` attributes of Modules can be assigned")
            if isinstance(value, V.TV) and value.value.name is None:
                value.value.name = target.attr
            obj.attrs[target.attr] = value
        else:
            raise self.error(target, "unsupported assignment target")

    # --- expressions -------------------------------------------------------------------

    def lookup(self, node: ast.Name) -> Any:
        name = node.id
        if name in self.env:
            val = self.env[name]
            if isinstance(val, V.Poison) and val.after_end:
                raise self.error(
                    node,
                    f"`{name}` is assigned only after `if end(...): break` in the loop at line {val.line}: "
                    f"a sequence that ends at its first step never assigns it, and it has no value before "
                    f"the loop; assign it before the loop (e.g. `{name} = zeros(batch, ...)`)",
                )
            if isinstance(val, V.Poison):
                raise self.error(
                    node,
                    f"`{name}` is assigned in only one branch of the `if` on a tensor at line "
                    f"{val.line} and has no value before it; assign it before the `if`",
                )
            return val
        if name in self.globals:
            return self.globals[name]
        self.loops.unbound_read(node)
        visible = [n for scope in self.local_stack for n in scope if not n.startswith("__")]
        raise self.error(node, f"unknown name `{name}`" + did_you_mean(name, visible))

    def eval_expr(self, node: ast.expr) -> Any:
        self.budget.enter(node)
        try:
            return self._eval_expr(node)
        finally:
            self.budget.leave()

    def _eval_expr(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Name):
            return self.lookup(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bytes, bool, type(None))):
            return self.budget.number(node.value, node)  # numbers within netc's limits
        if isinstance(node, (ast.Tuple, ast.List)):
            items = [self.eval_expr(e) for e in node.elts]
            if isinstance(node, ast.Tuple):
                return tuple(items)
            return items or V.PyList(serial=self.tick())  # `[]`: a list a loop may stack into
        if isinstance(node, ast.Dict):
            out = {}
            for k, v in zip(node.keys, node.values):
                if k is None:  # `**other`
                    raise self.error(v, "unsupported dict element")
                key = self.eval_expr(k)
                if not isinstance(key, _SCALARS):
                    raise self.error(k, f"dict keys are strings or numbers, got {_describe(key)}")
                out[key] = self.eval_expr(v)
            return out
        if isinstance(node, ast.Attribute):
            return self.attribute(self.eval_expr(node.value), node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.BinOp):
            return self.binop(node.op, self.eval_expr(node.left), self.eval_expr(node.right), node)
        if isinstance(node, ast.UnaryOp):
            return self.unary(node)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Compare):
            return self.compare(node)
        raise self.error(node, f"unsupported expression: {_expr_kind(node)}")

    def attribute(self, obj: Any, node: ast.Attribute) -> Any:
        attr = node.attr
        if isinstance(obj, V.NetcModule):
            if attr not in DSL_SYMBOLS and attr not in BY_FN_NAME:
                raise self.error(node, f"`netc` has no `{attr}`" + did_you_mean(attr, _NETC_NAMES))
            return _netc_symbol(attr)
        if isinstance(obj, V.ModuleInstance):
            if attr in obj.attrs:
                return obj.attrs[attr]
            if obj.cls.method(attr) is not None:
                return V.BoundMethod(obj, attr)
            known = [*obj.attrs, *obj.cls.method_names()]
            raise self.error(
                node, f"module `{obj.path or obj.cls.node.name}` has no attribute `{attr}`" + did_you_mean(attr, known)
            )
        if isinstance(obj, V.TV):
            if attr == "max_seq_len":
                dyn = self.dims.dynamic(obj.dims)
                if len(dyn) != 1:
                    raise self.error(node, f"`max_seq_len` needs exactly one dynamic dim, got [{', '.join(obj.dims)}]")
                return V.SeqLen(dyn[0], obj)
            raise self.error(node, f"tensors have no attribute `{attr}`")
        if isinstance(obj, V.PyList) and attr == "append":
            return V.BoundMethod(obj, "append")
        if isinstance(obj, V.Super) and attr == "__init__":
            return V.NOOP
        if isinstance(obj, V.Foreign):
            return V.Foreign(f"{obj.name}.{attr}")
        raise self.error(node, f"unsupported attribute `{attr}`")

    def no_list_operand(self, node: ast.AST, *operands: Any) -> None:
        """Operators on a stacked list would act on a Python list in eager mode: require `stack()`."""
        for v in operands:
            if isinstance(v, V.TV) and v.from_list:
                name = v.value.name or "ys"
                raise self.error(
                    node,
                    f"`{name}` is a list appended in a loop: when the model runs eagerly it is a "
                    f"Python list, on which operators act differently; use `stack({name})` first",
                )

    def unary(self, node: ast.UnaryOp) -> Any:
        v = self.eval_expr(node.operand)
        self.no_list_operand(node, v)
        if isinstance(node.op, ast.USub):
            if isinstance(v, V.TV):
                return self.emit(REGISTRY["neg"], [v], {}, node)[0]
            if isinstance(v, (int, float)):
                return self.budget.number(-v, node)
        if isinstance(node.op, ast.UAdd) and isinstance(v, (int, float, V.TV)):
            return v
        if isinstance(node.op, ast.Not) and not isinstance(v, V.TV):
            return not v
        raise self.error(node, "unsupported unary operation")

    def binop(self, operator: ast.operator, a: Any, b: Any, node: ast.AST) -> Any:
        entry = _BINOPS.get(type(operator))
        if entry is None:
            raise self.error(node, f"unsupported operator `{_OPERATOR_SYMBOLS.get(type(operator), '?')}`")
        opname, pyfn = entry
        num = (int, float)
        if isinstance(a, V.TV) or isinstance(b, V.TV):
            return self.tensor_binop(opname, a, b, node)
        if isinstance(a, V.DimRef) or isinstance(b, V.DimRef):
            try:
                if isinstance(a, V.DimRef) and isinstance(b, V.DimRef) and opname == "add":
                    return V.DimRef(self.dims.concat([a.name, b.name]).name)  # the dim `concat` makes
                dim, n = (a, b) if isinstance(a, V.DimRef) else (b, a)
                if opname != "mul" or not isinstance(n, int):
                    raise self.error(node, "dims combine as `n * dim` (an integer) or `a + b` (two static dims)")
                return V.DimRef(self.dims.scaled(dim.name, n).name)
            except DimError as e:
                raise self.error(node, str(e)) from None
        if isinstance(a, num) and isinstance(b, num):
            if opname == "div" and b == 0:
                raise self.error(node, "division by zero")
            return self.budget.number(pyfn(a, b), node)
        if isinstance(a, V.SeqLen) or isinstance(b, V.SeqLen):
            seq, n = (a, b) if isinstance(a, V.SeqLen) else (b, a)
            if isinstance(n, int) and not isinstance(n, bool):
                check = self.budget.number
                if opname == "mul":
                    return V.SeqLen(seq.dim, seq.tensor, check(seq.scale * n, node), check(seq.offset * n, node))
                if opname == "add":
                    return V.SeqLen(seq.dim, seq.tensor, seq.scale, check(seq.offset + n, node))
                if opname == "sub" and seq is a:
                    return V.SeqLen(seq.dim, seq.tensor, seq.scale, check(seq.offset - n, node))
            raise self.error(node, "`max_seq_len` takes `n * x.max_seq_len + m` with integers n, m")
        raise self.error(node, f"unsupported operands: {_describe(a)} and {_describe(b)}")

    def tensor_binop(self, opname: str, a: Any, b: Any, node: ast.AST) -> V.TV:
        """`a <op> b` with a tensor on at least one side; a Python number on the other is an attribute."""
        self.no_list_operand(node, a, b)
        if isinstance(a, V.TV) and isinstance(b, V.TV):
            return self.emit(REGISTRY[opname], [a, b], {}, node)[0]
        tv, other = (a, b) if isinstance(a, V.TV) else (b, a)
        if isinstance(other, bool) or not isinstance(other, (int, float)):
            raise self.error(node, f"cannot combine a tensor with {_describe(other)}")
        return self.emit(REGISTRY[opname], [tv], {"scalar": other, "scalar_left": tv is b}, node)[0]

    def compare(self, node: ast.Compare) -> Any:
        left = self.eval_expr(node.left)
        if len(node.ops) != 1:
            raise self.error(node, "chained comparisons are not supported")
        right = self.eval_expr(node.comparators[0])
        if isinstance(left, V.TV) or isinstance(right, V.TV):
            opname = _COMPARE.get(type(node.ops[0]))
            if opname is None:
                raise self.error(node, "tensors compare with == != < <= > >=")
            return self.tensor_binop(opname, left, right, node)
        fn = _PY_COMPARE.get(type(node.ops[0]))
        if fn is None or not all(isinstance(v, (int, float, str, bool, type(None))) for v in (left, right)):
            raise self.error(node, "unsupported comparison")
        return fn(left, right)

    def subscript(self, node: ast.Subscript) -> Any:
        obj = self.eval_expr(node.value)
        if isinstance(node.slice, ast.Slice):  # `x[a:b]`
            return self.slice(obj, node.slice, node)
        if isinstance(node.slice, ast.Tuple):  # `x[a, b]`
            what = "a tensor takes one index" if isinstance(obj, V.TV) else f"{_describe(obj)} takes one index"
            raise self.error(node, f"{what}: {_INDEXING}")
        idx = self.eval_expr(node.slice)
        if isinstance(obj, V.TV):
            if isinstance(idx, V.LoopIndex):
                return self.loops.index(obj, idx, node)
            raise self.error(
                node, "tensors can only be indexed by a loop index (`x[t]` in `for t in range(x.max_seq_len)`)"
            )
        if isinstance(obj, (tuple, list)) and isinstance(idx, int):
            if not -len(obj) <= idx < len(obj):
                raise self.error(node, f"index {idx} out of range for {len(obj)} items")
            return obj[idx]
        if isinstance(obj, dict) and isinstance(idx, _SCALARS) and idx in obj:
            return obj[idx]
        if isinstance(obj, V.NetcSym) and obj.name in ("Tensor", "Labels"):
            raise self.error(node, f"`{obj.name}[...]` is only for annotating network inputs")
        if isinstance(obj, dict) and isinstance(idx, _SCALARS):
            raise self.error(node, f"the dict has no key {idx!r}")
        what = {tuple: "a tuple", list: "a list", dict: "a dict"}.get(type(obj)) or _describe(obj)
        raise self.error(node, f"{what} cannot be indexed by {_describe(idx)}: {_INDEXING}")

    def slice(self, obj: Any, sl: ast.Slice, node: ast.Subscript) -> Any:
        """`obj[a:b:c]`: Python lists and tuples slice as in Python; a tensor has no slices."""
        if isinstance(obj, V.TV):
            raise self.error(node, self._tensor_slice_message(obj, sl))
        if not isinstance(obj, (tuple, list)):
            what = "a dict" if isinstance(obj, dict) else _describe(obj)
            raise self.error(node, f"{what} cannot be sliced: {_INDEXING}")
        bounds = [None if b is None else self.eval_expr(b) for b in (sl.lower, sl.upper, sl.step)]
        if any(b is not None and (isinstance(b, bool) or not isinstance(b, int)) for b in bounds) or bounds[2] == 0:
            raise self.error(node, "a list or tuple is sliced by integers (`parts[1:]`), with a step other than 0")
        return obj[slice(*bounds)]

    def _tensor_slice_message(self, obj: V.TV, sl: ast.Slice) -> str:
        """`y[:-1]` names no dim for its result: the error shows the `slice_frames` call that does."""
        dyn = [d for d in obj.value.dims if self.dims[d].kind == "dynamic"]
        axis = dyn[0] if len(dyn) == 1 else "<dim>"
        bounds = [f"{k}={ast.unparse(b)}" for k, b in (("start", sl.lower), ("stop", sl.upper)) if b is not None]
        call = f"slice_frames(x, axis={axis}, {', '.join([*bounds, 'out_axis=new_dim'])})"
        return (
            "a tensor cannot be sliced with `[...]` (it is indexed only by a loop index, `x[t]` in "
            f"`for t in range(x.max_seq_len)`): the result's dynamic dim needs a name; write `{call}` with "
            "`new_dim = Dim(...)` (each sequence's own frames, `y[:-1]` drops each one's last), or "
            "`shift_right(y, axis=..., value=BOS)` for a decoder's input, `pad_frames(...)` to add frames"
        )

    # --- calls -------------------------------------------------------------------------

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
        if isinstance(fn, V.NetcSym) and fn.name == "choice":
            return self.loops.choice(node)
        args, kwargs = self.call_args(node)
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
        raise self.error(node, f"{_describe(fn)} is not callable")

    def call_builtin(self, name: str, args, kwargs, node) -> Any:
        if name == "noop":
            return None
        if name == "super":
            return V.Super()
        if name == "print":
            return None  # printing is for eager runs; compiled code has nothing to show
        if name == "len" and len(args) == 1 and isinstance(args[0], (tuple, list)):
            return len(args[0])
        if name == "abs" and len(args) == 1 and not kwargs:
            if isinstance(args[0], V.TV):  # `abs(x)` on a tensor is netc's `abs` (eagerly, `ETensor.__abs__`)
                return self.call_netc("abs", args, {}, node)
            if isinstance(args[0], (int, float)):
                return abs(args[0])
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
        raise self.error(node, f"`{opname}` expects a tensor, got {_describe(v)}")

    def attr_value(self, v: Any, node, opname: str) -> Any:
        """Attributes in IR are plain data: dims by name."""
        if isinstance(v, V.DimRef):
            return v.name
        if isinstance(v, (list, tuple)):
            return [self.attr_value(x, node, opname) for x in v]
        if isinstance(v, (int, float, str, bool)) or v is None:
            return v
        raise self.error(node, f"bad argument to `{opname}`: {_describe(v)}")

    def mark_as_loss(self, args, kwargs, node) -> None:
        try:
            value, name = _loss_args(*args, **kwargs)
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
            name, size = _dim_args(*args, **kwargs)
        except TypeError:
            raise self.error(node, "use Dim(name) or Dim(name, size)") from None
        try:
            return V.DimRef(self.dims.declare(name, size).name)
        except DimError as e:
            raise self.error(node, str(e)) from None

    def construct_op_module(self, opdef: OpDef, args, kwargs, node: ast.Call) -> V.OpModule:
        try:
            bound = signature(opdef.ctor).bind(*args, **kwargs)
        except TypeError as e:
            raise self.error(node, f"bad arguments to `{opdef.fn_name}`: {e}") from None
        bound.apply_defaults()
        attrs = {k: self.attr_value(v, node, opdef.fn_name or opdef.name) for k, v in bound.arguments.items()}
        base = self.stmt_target or opdef.name
        path = self.namer.module_path(self.scope, base)
        span = self.span(node)
        return V.OpModule(op=opdef.name, attrs=attrs, path=path, call_path=(*self.call_path, span.key()))

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
        base = self.stmt_target or cls.node.name.lower()
        inst = V.ModuleInstance(cls=cls, path=self.namer.module_path(self.scope, base))
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


_MISSING = object()
_SCALARS = (str, int, float, bool, type(None))  # Python values usable as dict keys


# statements without a body (`ast.stmt` subclasses that are not compound statements)
_SIMPLE_STATEMENTS = (
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.Expr,
    ast.Return,
    ast.Pass,
    ast.Delete,
    ast.Raise,
    ast.Assert,
    ast.Global,
    ast.Nonlocal,
    ast.Import,
    ast.ImportFrom,
    ast.Break,
    ast.Continue,
)
_STATEMENT_KINDS = {
    ast.Delete: "`del`",
    ast.Raise: "`raise`",
    ast.Assert: "`assert`",
    ast.Global: "`global`",
    ast.Nonlocal: "`nonlocal`",
    ast.Import: "`import`",
    ast.ImportFrom: "`import`",
    ast.Break: "`break`",
    ast.Continue: "`continue`",
    ast.Try: "`try`",
    ast.TryStar: "`try`",
    ast.With: "`with`",
    ast.AsyncWith: "`async with`",
    ast.AsyncFor: "`async for`",
    ast.Match: "`match`",
}
_OPERATOR_SYMBOLS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.MatMult: "@",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
}


def _stmt_kind(stmt: ast.stmt) -> str:
    return _STATEMENT_KINDS.get(type(stmt), type(stmt).__name__)


def _expr_kind(node: ast.expr) -> str:
    if isinstance(node, ast.Constant):
        return {complex: "a complex number", type(...): "`...`"}.get(type(node.value), type(node.value).__name__)
    return {
        ast.IfExp: "a conditional expression (`a if c else b`)",
        ast.Lambda: "`lambda`",
        ast.JoinedStr: "an f-string",
        ast.BoolOp: "`and`/`or`",
        ast.Starred: "`*` unpacking",
        ast.NamedExpr: "`:=`",
    }.get(type(node), type(node).__name__)


def _is_string(stmt: ast.stmt) -> bool:
    """A string on its own: a docstring."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _appended_to(expr: ast.expr) -> str | None:
    """`ys` for `ys.append(...)`."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "append":
        target = expr.func.value
        return target.id if isinstance(target, ast.Name) else None
    return None


def _netc_symbol(name: str) -> Any:
    return V.DimRef("batch") if name == "batch" else V.NetcSym(name)


def _loss_args(value, name):
    return value, name


def _dim_args(name, size=None) -> tuple[str, int | None]:
    if not isinstance(name, str) or not (size is None or (isinstance(size, int) and size > 0)):
        raise TypeError
    return name, size


_INDEXING = (
    "netc indexes tensors by a loop index (`x[t]` in `for t in range(x.max_seq_len)`), and Python lists, "
    "tuples and dicts by their Python keys (`parts[0]`, `parts[1:]`)"
)


def _describe(v: Any) -> str:
    if isinstance(v, V.TV):
        return f"a tensor [{', '.join(v.dims)}]"
    if isinstance(v, V.DimRef):
        return f"dim `{v.name}`"
    if isinstance(v, V.PyList):
        return "a list"
    if isinstance(v, V.SeqLen):
        return "`max_seq_len`"
    if isinstance(v, (V.FunctionRef, V.ClassRef)):
        return f"`{v.node.name}`"
    if isinstance(v, V.NetcSym):
        return f"`{v.name}`"
    return f"`{v!r}`" if isinstance(v, (int, float, str, bool)) or v is None else type(v).__name__


def parse_file(path: str, source: str | None = None, network: str | None = None) -> Graph:
    """The IR of the @network function in the file at `path` (or in `source`, given for it)."""
    try:
        tracer = Tracer(read_source(path, source))
    except CompileError as e:
        if path.endswith((".py", ".pyw")) or path.startswith("<"):
            raise
        # `netc compile README.md`: say what the file is, not which Python limit its prose broke
        message = "not a Python model file: netc compiles Python source (such as `model.py`)"
        where = f" and line {e.span.line} is not Python" if e.span is not None else ""
        raise CompileError(None, message + where, file=path) from None
    try:
        return tracer.trace(network)
    finally:
        tracer.close()

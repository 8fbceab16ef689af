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
from netc.parser import values as V
from netc.parser.budget import Budget
from netc.parser.calls import Calls
from netc.parser.expressions import Expressions
from netc.parser.grow import check_growing
from netc.parser.iterables import all_rules
from netc.parser.loops import LoopBuilder
from netc.parser.names import Namer
from netc.parser.source import Source, read_source
from netc.parser.statements import SIMPLE_STATEMENTS, Statements, is_string, stmt_kind
from netc.parser.symbols import BUILTINS, DSL_SYMBOLS, NETC_NAMES, SCALARS, describe, netc_symbol, not_imported
from netc.suggest import did_you_mean, listing


class Tracer(Statements, Expressions, Calls):
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
        # modules by their call path: a constructor run again (an unrolled `for k in range(n)`) is
        # the same module, as a loop body's is
        self.made_modules: dict[tuple, Any] = {}
        self.scope: list[str] = []  # module path prefix for parameters
        self.stmt_target: str | None = None  # the single Name a statement assigns, for naming
        self.loops = LoopBuilder(self)
        self.local_stack: list[dict[str, Any]] = [self.globals]
        self.tensor_if_depth = 0  # inside `if` on a tensor: both branches run, so no appends there
        self.budget = Budget(self.error)
        self.clock = 0
        # `module_attributes`: what each `self.<name> = ...` assigned, by the target's place
        self.attr_log: dict[tuple[int, int], list[tuple[V.ModuleInstance, Any]]] | None = None

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
        if param is not None and param.tied:
            attrs = {**attrs, "tied": self.tie(param, roles, node)}
        if param is not None:
            if param.params is None:
                param.params = roles
                for role, dims in roles.items():
                    if role in param.tied:  # another module's parameter: no variable of its own
                        continue
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

    def tie(self, mod: V.OpModule, roles: dict[str, tuple[str, ...]], node: ast.AST) -> dict[str, list]:
        """For each role of `mod` that is another module's parameter (`weight=emb.weight`):
        [module path, role, transposed] of the variable it is. The dims must be the same (the
        named dims give the orientation: `Linear`'s W [model, vocab] is an `Embedding`'s
        [vocab, model] transposed)."""
        out: dict[str, list] = {}
        for role, ref in mod.tied.items():
            owner, orole = ref.module, ref.role
            while orole in owner.tied and owner is not mod:  # a parameter tied in turn: its variable
                owner, orole = owner.tied[orole].module, owner.tied[orole].role
            what = f"`{ref.module.path}.{ref.attr}`"
            if owner is mod:
                raise self.error(node, f"module `{mod.path}` cannot take {what}: that is its own parameter")
            if owner.params is None:
                raise self.error(
                    node,
                    f"{what} is used before `{owner.path}` is called: its shape comes from its first call, "
                    f"so call `{owner.path}` first",
                )
            have, want = owner.params[orole], roles[role]
            fn = REGISTRY[mod.op].fn_name
            if len(set(want)) != len(want):
                raise self.error(
                    node, f"`{fn}`'s {ref.attr} would be [{', '.join(want)}], a dim twice: it cannot be {what}"
                )
            if sorted(have) != sorted(want):
                raise self.error(
                    node,
                    f"`{fn}`'s {ref.attr} would be [{', '.join(want)}] but {what} is [{', '.join(have)}]: "
                    "a shared parameter needs the same dims (in either order)",
                )
            out[role] = [owner.path, orole, tuple(have) != tuple(want)]
        return out

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
        elif is_string(stmt) or isinstance(stmt, ast.Pass):
            pass  # a docstring
        elif isinstance(stmt, ast.FunctionDef):
            self.globals[stmt.name] = V.FunctionRef(stmt)
        elif isinstance(stmt, ast.ClassDef):
            self.globals[stmt.name] = V.ClassRef(stmt)
        elif isinstance(stmt, ast.If) and self._is_main_guard(stmt.test):
            pass  # `if __name__ == "__main__":` is eager-only code
        elif isinstance(stmt, SIMPLE_STATEMENTS):
            raise self.error(stmt, "only imports, dims and constants are supported at module level")
        else:
            raise self.error(stmt, f"unsupported statement at module level: {stmt_kind(stmt)}")

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
                    raise self.error(alias, f"`netc` has no `{name}`" + did_you_mean(name, NETC_NAMES))
                self.globals[as_name] = netc_symbol(name)
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
        for kind in all_rules():  # the loop kinds' own checks (`netc.parser.iterables`)
            kind.check_graph(g)
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
                # the class dim: static (a vocabulary), or dynamic (positions in another input's frames,
                # e.g. a hard attention's alignment `Labels[batch, dec_time, enc_time]`)
                if kind.name == "Labels" and (
                    len(dims) < 2 or self.dims[dims[-1]].kind not in ("static", "dynamic") or dims[-1] in dims[:-1]
                ):
                    raise self.error(ann, "Labels[...] ends with its class dim, e.g. Labels[batch, time, vocab]")
                return kind.name, dims
        raise self.error(ann, "network inputs are annotated Tensor[...] or Labels[...]")

    def network_outputs(self, node: ast.AST, value: Any) -> list[Output]:
        items = value.items() if isinstance(value, dict) else [("output", value)]
        outs = []
        for name, v in items:
            if not isinstance(name, str):
                raise self.error(node, f"output names are strings, got {describe(name)}")
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

    # --- expressions -------------------------------------------------------------------

    def lookup(self, node: ast.Name) -> Any:
        name = node.id
        if name in self.env:
            val = self.env[name]
            if isinstance(val, V.Poison) and val.reason is not None:
                raise self.error(node, val.reason)
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
        if name in NETC_NAMES:
            raise self.error(node, not_imported(name))
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
                if not isinstance(key, SCALARS):
                    raise self.error(k, f"dict keys are strings or numbers, got {describe(key)}")
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

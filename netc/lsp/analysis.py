"""What the language server knows about one version of a model file, without any LSP types:
its compile errors, what a position shows on hover, where a name is defined.

Positions here are as netc's spans count them: 1-based lines, 0-based columns in characters
(the server converts from and to the client's UTF-16 columns). A file with several @network
functions is compiled once per network; a position belongs to the network whose function it is
in (module-level code: the first one).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from netc.errors import CompileError, Span
from netc.ir.model import DimDef, Graph
from netc.parser.facts import AttrValue, module_attributes, module_dims
from netc.parser.source import Source, network_functions, read_source
from netc.preview.model import Preview, PreviewNode


@dataclass
class Network:
    name: str | None  # None: the file's only network (or none compiled)
    first_line: int
    last_line: int
    graph: Graph | None = None
    preview: Preview | None = None  # built after the diagnostics, for hovers


@dataclass
class Analysis:
    path: str
    text: str
    errors: list[CompileError] = field(default_factory=list)
    networks: list[Network] = field(default_factory=list)
    tree: ast.Module | None = None
    source: Source | None = None  # the parser's view of `text`: spans of tree nodes in the file
    # asked for on hover, once: module-level names -> the dims they hold; modules' attributes
    _dims: dict[str, DimDef] | None = None
    _attrs: dict[tuple[int, int], list[AttrValue]] | None = None

    def module_dims(self) -> dict[str, DimDef]:
        if self._dims is None:
            try:
                self._dims = module_dims(self.path, self.text)
            except CompileError:  # a file the parser cannot read: the diagnostics say why
                self._dims = {}
        return self._dims

    def attributes(self) -> dict[tuple[int, int], list[AttrValue]]:
        """What each `self.<name> = ...` assigned, over every network of the file."""
        if self._attrs is None:
            self._attrs = {}
            for net in self.networks:
                try:
                    found = module_attributes(self.path, self.text, net.name)
                except CompileError:
                    continue
                for key, values in found.items():
                    known = self._attrs.setdefault(key, [])
                    known += [v for v in values if v not in known]
        return self._attrs

    def network_at(self, line: int) -> Network | None:
        inside = [n for n in self.networks if n.first_line <= line <= n.last_line]
        return (inside or self.networks or [None])[0]


def analyse(path: str, text: str) -> Analysis:
    """Compile every @network function of `text` (the parser and passes: the located errors
    users fix while typing; the targets' own refusals come with the preview, `add_previews`)."""
    from netc.compiler import compile_graph

    a = Analysis(path, text)
    try:
        a.source = read_source(path, text)
        a.tree = a.source.parse()
    except CompileError:
        pass  # the compiler reports it, located
    nets = network_functions(a.tree) if a.tree is not None else []
    if a.tree is not None and not nets:
        return a  # not a model (a helper file, a script): nothing to say
    names = [(f.name, f.lineno, f.end_lineno or f.lineno) for f in nets] if len(nets) > 1 else [(None, 1, 10**9)]
    for name, first, last in names:
        net = Network(name, first, last)
        try:
            net.graph = compile_graph(path, source=text, network=name)
        except CompileError as e:
            if e.message not in {x.message for x in a.errors} or e.span not in {x.span for x in a.errors}:
                a.errors.append(e)
        a.networks.append(net)
    return a


def add_previews(a: Analysis) -> None:
    """Each compiled network's preview (both targets emitted): a target's refusal is one more error."""
    from netc.preview.graph import build_preview

    for net in a.networks:
        if net.graph is None or net.preview is not None:
            continue
        try:
            net.preview = build_preview(net.graph, a.text)
        except CompileError as e:
            a.errors.append(e)


# --- names --------------------------------------------------------------------------------


def word_at(text: str, line: int, col: int) -> tuple[str, int, int] | None:
    """The identifier at (line, col) and its columns [start, end)."""
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return None
    s = lines[line - 1]
    start = col
    while start > 0 and (s[start - 1].isalnum() or s[start - 1] == "_"):
        start -= 1
    end = col
    while end < len(s) and (s[end].isalnum() or s[end] == "_"):
        end += 1
    word = s[start:end]
    return (word, start, end) if word and word.isidentifier() else None


def _span(a: Analysis, node: ast.AST) -> Span:
    assert a.source is not None  # spans are asked of nodes of `a.tree`
    if isinstance(node, ast.FunctionDef | ast.ClassDef):  # its name, not its whole body
        return a.source.name_span(node)
    return a.source.node_span(node)


def _assigned(stmts: list[ast.stmt], name: str, self_attr: bool = False) -> ast.AST | None:
    """The first statement in `stmts` (not descending into functions and classes) that binds
    `name` (`self.<name>` with `self_attr`): the target node."""
    for stmt in stmts:
        for node in ast.walk(stmt) if not isinstance(stmt, ast.FunctionDef | ast.ClassDef) else [stmt]:
            if self_attr:
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.ctx, ast.Store)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "self"
                    and node.attr == name
                ):
                    return node
                continue
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
                return node
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id == name:
                return node
            if isinstance(node, ast.arg) and node.arg == name:
                return node
            if isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == name:
                return node
    return None


def definition(a: Analysis, line: int, col: int) -> Span | None:
    """Where the name at (line, col) is defined: a local of the enclosing function (a parameter
    or its first assignment), a `self.<attr>` set in the class's methods, a module-level name (a
    dim, a Module class, a helper, an import)."""
    if a.tree is None:
        return None
    w = word_at(a.text, line, col)
    if w is None:
        return None
    word, start, _ = w
    lines = a.text.splitlines()
    is_attr = start > 0 and lines[line - 1][:start].rstrip().endswith("self.")
    scopes: list[ast.AST] = [a.tree]  # module, class, function: the ones containing the position
    for node in ast.walk(a.tree):
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.lineno <= line <= (node.end_lineno or 0):
            scopes.append(node)
    scopes.sort(key=lambda n: getattr(n, "lineno", 0))
    if is_attr:
        cls = next((s for s in reversed(scopes) if isinstance(s, ast.ClassDef)), None)
        methods = [m for m in cls.body if isinstance(m, ast.FunctionDef)] if cls else []
        init = sorted(methods, key=lambda m: m.name != "__init__")
        found = next((t for m in init if (t := _assigned(m.body, word, self_attr=True)) is not None), None)
        return _span(a, found) if found is not None else None
    for scope in reversed(scopes):
        if isinstance(scope, ast.ClassDef):
            continue  # class bodies are not scopes of the methods in them
        stmts = list(scope.body) if not isinstance(scope, ast.FunctionDef) else []
        if isinstance(scope, ast.FunctionDef):
            args = scope.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                if arg.arg == word:
                    return _span(a, arg)
            stmts = scope.body
        found = _assigned(stmts, word)
        if found is not None:
            return _span(a, found)
    return None


# --- hover ---------------------------------------------------------------------------------


def _inside(span: Span, line: int, col: int) -> bool:
    return (span.line, span.col) <= (line, col) < (span.end_line, span.end_col) or (
        span.line == span.end_line == line and span.col <= col <= span.end_col
    )


def _within(inner: Span, outer: Span) -> bool:
    return (outer.line, outer.col) <= (inner.line, inner.col) and (inner.end_line, inner.end_col) <= (
        outer.end_line,
        outer.end_col,
    )


def _value_read(p: Preview, named: list[PreviewNode], line: int, col: int) -> PreviewNode | None:
    """The value a name read at (line, col) holds, as Python runs the loops around it: its last
    assignment before the position in the innermost loop that assigns it; where that loop
    assigns it only later, the previous step's value (the loop's state, or the state a shift
    made of it); outside every loop, the last assignment before the position."""
    loops = [c for c in p.clusters if _inside(c.source.span, line, col)]
    loops.sort(key=lambda c: (c.source.span.line, c.source.span.col), reverse=True)  # innermost first
    start = line
    for loop in [*loops, None]:
        inside = [n for n in named if loop is None or _within(n.source.span, loop.source.span)]
        before = [n for n in inside if n.source.span.line < start]
        if before:  # the new value rather than the state where both stand on one line
            return max(before, key=lambda n: (n.source.span.line, n.kind != "state"))
        if inside and loop is not None:  # assigned later in this loop: the previous step's value
            state = [n for n in inside if n.kind == "state" and n.cluster == loop.id]
            shifted = [n for n in inside if n.op == "shift_frames" and n.hoisted_from == loop.id]
            return (state or shifted or inside)[0]
        if loop is not None:
            start = loop.source.span.line  # not assigned in it: as read where the loop starts
    return None


def node_at(p: Preview, word: str | None, line: int, col: int) -> PreviewNode | None:
    """The node a position shows: a value of that name (the user's variable names included)
    assigned on this line, else the value the name holds there (`_value_read`), else the
    innermost node whose source span contains the position."""
    if word:
        named = [
            n
            for n in p.nodes
            if (n.label == word or word in n.names) and n.kind in ("op", "state", "input") and n.source is not None
        ]
        here = [n for n in named if n.source.span.line == line]
        if here:
            return here[0]
        read = _value_read(p, named, line, col)
        if read is not None:
            return read
    containing = [n for n in p.nodes if n.source is not None and _inside(n.source.span, line, col)]
    if not containing:
        return None
    return min(containing, key=lambda n: (n.source.span.end_line - n.source.span.line, len(n.source.text)))


def _module_level(a: Analysis, line: int, col: int) -> bool:
    """Whether the name at (line, col) is bound at module level (not a local of a function)."""
    where = definition(a, line, col)
    if where is None or a.tree is None:
        return False
    return not any(
        isinstance(s, ast.FunctionDef | ast.ClassDef) and s.lineno <= where.line <= (s.end_lineno or s.lineno)
        for s in a.tree.body
    )


def _dim_text(d: DimDef) -> str:
    return f"static, size {d.size}" if d.kind == "static" else d.kind


def _attribute_hover(a: Analysis, word: str, line: int, col: int) -> str | None:
    """`self.<word>`: what each instance of the module holds there (a layer with its parameters,
    a dim, a sub-module, a number), as the networks of the file built them."""
    where = definition(a, line, col)
    if where is None:
        return None
    values = a.attributes().get(where.key(), [])
    cls = next(
        (s.name for s in ast.walk(a.tree) if isinstance(s, ast.ClassDef) and s.lineno <= where.line <= s.end_lineno),
        None,
    )
    head = f"**self.{word}**" + (f": attribute of `{cls}`" if cls else "")
    if not values:
        return head
    graphs = [n.graph for n in a.networks if n.graph is not None]
    dims = {d.name: d for g in graphs for d in g.dims}
    params = {}
    for g in graphs:
        for prm in [*g.params, *(g.search.params if g.search is not None else [])]:
            params.setdefault(prm.path, {})[prm.name] = prm.dims
    lines = []
    for v in values[:MAX_INSTANCES]:
        text = v.text
        if v.dim is not None and v.dim in dims:
            text += f" ({_dim_text(dims[v.dim])})"
        if v.param_path in params:
            text += ": " + ", ".join(f"`{n}` [{', '.join(ds)}]" for n, ds in params[v.param_path].items())
        lines.append(f"- `{v.instance}`: {text}")
    if len(values) > MAX_INSTANCES:
        lines.append(f"- ... and {len(values) - MAX_INSTANCES} more")
    return head + "\n\n" + "\n".join(lines)


MAX_INSTANCES = 6  # instances a module attribute's hover lists


def hover(a: Analysis, line: int, col: int) -> str | None:
    """Markdown for the position: a dim's kind and size; a module attribute's value in each
    instance; a value's dims and dtype, whether it is loop state, stacked or hoisted, its
    RETURNN layer and torch line."""
    w = word_at(a.text, line, col)
    word = w[0] if w else None
    net = a.network_at(line)
    if net is None or net.graph is None:
        return None
    if word is not None and a.text.splitlines()[line - 1][: w[1]].rstrip().endswith("self."):
        return _attribute_hover(a, word, line, col)
    if word is not None and word in a.module_dims() and _module_level(a, line, col):
        d = a.module_dims()[word]
        return f"**dim** `{d.name}`" + (f" (`{word}`)" if word != d.name else "") + f": {_dim_text(d)}"
    if net.preview is None:  # a target refused the model (see the diagnostics): what the IR says
        from netc.ir.uses import values_by_id

        named = [v for v in values_by_id(net.graph).values() if word is not None and v.name == word]
        return f"**{word}**: [{', '.join(named[0].dims)}] {named[0].dtype}" if named else None
    n = node_at(net.preview, word, line, col)
    if n is None:
        return None
    p = net.preview
    dtype = ""
    if n.value is not None:
        from netc.ir.uses import values_by_id

        v = values_by_id(net.graph).get(n.value)
        dtype = f" {v.dtype}" if v is not None else ""
    shape = ", ".join(f"[{', '.join(d)}]" for d in n.dims) or "(no value)"
    lines = [f"**{n.label}**: {shape}{dtype}"]
    marks = []
    if n.kind == "state":
        marks.append("loop state (carried from step to step)")
    if any(e.src == n.id and e.kind == "stack" for e in p.edges):
        marks.append("stacked over the loop's steps")
    if any(e.src == n.id and e.kind == "last" for e in p.edges):
        marks.append("read after the loop (its last step)")
    if n.hoisted_from:
        loop = next((c for c in p.clusters if c.id == n.hoisted_from), None)
        marks.append(f"hoisted out of the loop at line {loop.source.span.line if loop else '?'}")
    if n.cluster and not n.hoisted_from:
        loop = next((c for c in p.clusters if c.id == n.cluster), None)
        marks.append(f"in the loop at line {loop.source.span.line if loop else '?'}")
    if n.fused:
        marks.append(f"runs as one native op (`{n.fused}`)")
    if marks:
        lines.append("; ".join(marks))
    if n.returnn is not None:
        lines.append(f"RETURNN: layer `{n.returnn.name}` (`{n.returnn.kind}`)")
    if n.torch is not None:
        lines.append(f"torch: `{n.torch.code.splitlines()[0]}`")
    return "\n\n".join(lines)

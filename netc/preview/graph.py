"""The optimised IR → a `Preview`: nodes, edges and loop clusters, each with its source and
what both emitters made of it (read from the emitters' provenance, never re-derived)."""

from __future__ import annotations

import ast
import re
import textwrap

from netc.emit_tf.emitter import ReturnnEmitter
from netc.emit_torch.emitter import TorchEmitter
from netc.emit_torch.module import render_module
from netc.errors import Span
from netc.ir.model import Graph, Loop, Node, Op, Output
from netc.ir.uses import values_by_id
from netc.naming import Code, py_literal, py_str
from netc.preview.model import EdgeKind, Emitted, NodeKind, Preview, PreviewCluster, PreviewEdge, PreviewNode, Source


def build_preview(g: Graph, source: str) -> Preview:
    """Raises CompileError when a target rejects the model (as `netc compile` would)."""
    returnn = ReturnnEmitter(g)
    returnn_text = returnn.render()
    torch_text, torch = render_module(g)
    return _Builder(g, source, returnn, returnn_text, torch, torch_text).build()


def _assigned_names(path: str, source: str) -> dict[tuple[int, int, int, int], list[str]]:
    """Each expression the source assigns to names (`scores = ...`, `a, b = f(x), g(x)`,
    `self.h = ...`), by its span: those names."""
    from netc.parser.source import read_source

    src = read_source(path, source)
    out: dict[tuple[int, int, int, int], list[str]] = {}

    def bind(target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List):
            for t, v in zip(target.elts, value.elts):
                bind(t, v)
            return
        name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None
        if name is not None:
            s = src.node_span(value)
            out.setdefault((s.line, s.col, s.end_line, s.end_col), []).append(name)

    for node in ast.walk(src.parse()):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                bind(target, node.value)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
            bind(node.target, node.value)
    return out


def _contains(outer: Span, inner: Span) -> bool:
    return (
        outer.file == inner.file
        and (outer.line, outer.col) <= (inner.line, inner.col)
        and (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)
    )


def _entry(name: str, layer: dict) -> str:
    return f"{py_str(name)}: {py_literal(layer)}"


class _Builder:
    def __init__(self, g: Graph, source: str, rem: ReturnnEmitter, config: str, tem: TorchEmitter, module: str):
        self.g, self.rem, self.tem = g, rem, tem
        self.source_lines = source.splitlines()
        self.config_lines = config.splitlines()
        self.torch_lines = [line.strip() for line in module.splitlines()]
        self.nodes: dict[str, PreviewNode] = {}
        self.edges: dict[tuple[str, str, str, str], PreviewEdge] = {}
        self.clusters: list[PreviewCluster] = []
        self.src: dict[int, tuple[str, EdgeKind]] = {}  # value id -> the node showing it, how it is read
        self.loop_spans: list[tuple[str, Span]] = []  # every loop, outer before inner (for hoisting)
        self.parent: dict[str, str | None] = {}
        self.values = values_by_id(g)
        self.torch_loop_at = 0  # where the next loop's lines start in the torch module
        self.assigned = _assigned_names(g.source_file, source)

    # --- helpers -----------------------------------------------------------------------

    def source(self, span: Span, max_lines: int = 3) -> Source:
        lines = self.source_lines[span.line - 1 : min(span.end_line, span.line + max_lines - 1)]
        return Source(span=span, text=textwrap.dedent("\n".join(lines)))

    def add(self, node: PreviewNode) -> None:
        self.nodes[node.id] = node

    def edge(self, value: int, dst: str, kind: EdgeKind | None = None, label: str = "") -> None:
        src, how = self.src[value]
        e = PreviewEdge(src=src, dst=dst, kind=kind or how, label=label)
        self.edges.setdefault((e.src, e.dst, e.kind, e.label), e)

    def torch_lines_with(self, pattern: str) -> list[str]:
        return [line for line in self.torch_lines if re.search(pattern, line)]

    def returnn_layer(self, path: tuple[str, ...]) -> dict:
        return self.rem.blocks[path[:-1]].layers[path[-1]]

    # --- the walk ----------------------------------------------------------------------

    def build(self) -> Preview:
        g = self.g
        self._number_loops(g.body, None)
        forward = self.torch_lines_with(r"^def forward\(")
        if forward and forward[0].endswith("("):  # a signature on several lines
            at = self.torch_lines.index(forward[0])
            forward = self.torch_lines[at : self.torch_lines.index("):", at) + 1]
        for k, inp in enumerate(g.inputs):
            nid = f"i{k}"
            extern = [line.strip() for line in self.config_lines if line.startswith(f"    {inp.name!r}: ")]
            var = self.tem.var[inp.value.id]
            self.add(
                PreviewNode(
                    id=nid,
                    kind="input",
                    label=inp.name,
                    value=inp.value.id,
                    dims=[list(inp.annotated_dims)],
                    source=None if inp.span is None else self.source(inp.span),
                    returnn=Emitted(name=f"data:{inp.name}", kind="extern_data", code="\n".join(extern)),
                    torch=Emitted(name=var, kind="input", code="\n".join(forward)),
                )
            )
            self.src[inp.value.id] = (nid, "data")
        self.block(g.body, None, ())
        returns = "\n".join(self.torch_lines_with(r"^return \{"))
        for k, o in enumerate(g.outputs):
            dims = [list(self.values[o.value].dims)]
            self.result(f"o{k}", "output", o, dims, Emitted(name=o.name, kind="return", code=returns))
        for k, loss in enumerate(g.losses):
            sums = "\n".join(self.torch_lines_with(re.escape(f"# loss {py_str(loss.name)}")))
            self.result(f"l{k}", "loss", loss, [], Emitted(name=loss.name, kind="sum", code=sums))
        return Preview(
            source_file=g.source_file,
            network=g.network,
            nodes=list(self.nodes.values()),
            edges=list(self.edges.values()),
            clusters=self.clusters,
            ir=g,
        )

    def result(self, nid: str, kind: NodeKind, o: Output, dims: list[list[str]], torch: Emitted) -> None:
        """An output or a loss: a layer of the network in RETURNN, a returned value in torch."""
        name = self.rem.output_layers.get(o.name, o.name)  # an output folded into a loss layer is that layer
        layer = self.rem.blocks[()].layers[name]
        returnn = Emitted(name=name, kind=str(layer["class"]), code=_entry(name, layer))
        source = None if o.span is None else self.source(o.span)
        self.add(
            PreviewNode(
                id=nid, kind=kind, label=o.name, value=o.value, dims=dims, source=source, returnn=returnn, torch=torch
            )
        )
        self.edge(o.value, nid)

    def _number_loops(self, nodes: list[Node], parent: str | None) -> None:
        for n in nodes:
            if isinstance(n, Loop):
                cid = f"c{len(self.loop_spans)}"
                self.loop_spans.append((cid, n.span))
                self.parent[cid] = parent
                self._number_loops(n.body, cid)

    def block(self, nodes: list[Node], cluster: str | None, path: tuple[str, ...]) -> None:
        for n in nodes:
            if isinstance(n, Loop):
                self.loop(n, cluster, path)
            else:
                self.op(n, cluster)

    def _hoisted_from(self, op: Op, cluster: str | None) -> str | None:
        """The innermost loop whose source holds the op while the op is not in it."""
        chain = set()
        while cluster is not None:
            chain.add(cluster)
            cluster = self.parent[cluster]
        found = [cid for cid, span in self.loop_spans if cid not in chain and _contains(span, op.span)]
        return found[-1] if found else None

    def op(self, op: Op, cluster: str | None) -> None:
        first = op.outs[0].id
        nid = f"v{first}"
        path = self.rem.op_layers[first]
        returnn = None  # no layer of its own, e.g. zeros a state starts from (RETURNN's default)
        if path:
            layer = self.returnn_layer(path)
            returnn = Emitted(name="/".join(path), kind=str(layer["class"]), code=_entry(path[-1], layer))
        line = self.tem.op_lines[first]
        expr = line.split(" = ", 1)[1]
        call = re.match(r"[\w.]+(?=\()", expr)
        label = op.outs[0].name or op.op
        s = op.span
        names = [n for n in self.assigned.get((s.line, s.col, s.end_line, s.end_col), []) if n != label]
        self.add(
            PreviewNode(
                id=nid,
                kind="op",
                label=label,
                names=list(dict.fromkeys(names)),
                op=op.op,
                value=first,
                dims=[list(v.dims) for v in op.outs],
                cluster=cluster,
                hoisted_from=self._hoisted_from(op, cluster),
                fused=op.op if op.unfused else None,
                source=self.source(op.span),
                returnn=returnn,
                torch=Emitted(
                    name=", ".join(self.tem.var[v.id] for v in op.outs),
                    kind=call.group(0) if call else op.op,
                    code=line,
                ),
            )
        )
        for a in op.args:
            self.edge(a, nid)
        for v in op.outs:
            self.src[v.id] = (nid, "data")

    def loop(self, n: Loop, parent: str | None, outer_path: tuple[str, ...]) -> None:
        cid = f"c{len(self.clusters)}"
        path = (*outer_path, n.name)
        unit = self.rem.blocks[path]
        rec = {k: Code("{...}") if k == "unit" else v for k, v in self.rem.blocks[outer_path].layers[n.name].items()}
        how = f"until end, steps as {n.axis}" if n.end is not None else f"over {n.axis}"
        # the torch emitter writes loops in this same order, each after a `# loop ... (line N)` comment
        lines = self.torch_lines
        at = next(k for k in range(self.torch_loop_at, len(lines)) if lines[k].startswith("# loop"))
        torch_head = next(line for line in lines[at + 1 :] if line.startswith(("for ", "while ")))
        self.torch_loop_at = at + 1
        self.clusters.append(
            PreviewCluster(
                id=cid,
                parent=parent,
                label=f"loop {how}{' backwards' if n.reverse else ''} (line {n.span.line})",
                axis=n.axis,
                source=self.source(n.span, max_lines=1),  # the loop's head
                returnn=Emitted(name="/".join(path), kind="rec", code=_entry(n.name, rec)),
                torch=Emitted(
                    name=torch_head.split()[1] if torch_head.startswith("for ") else "while",
                    kind=torch_head.split()[0],
                    code=f"{lines[at]}\n{torch_head}",
                ),
            )
        )
        for s in n.seqs:
            self.src[s.inner.id] = (self.src[s.outer][0], "frame")
        for i in n.invariants:
            self.src[i.inner.id] = (self.src[i.outer][0], "invariant")
        for c in n.carries:
            sid = f"s{c.inner.id}"
            layer_name = unit.refs[c.inner.id].removeprefix("prev:")
            var = self.tem.var[c.inner.id]
            self.add(
                PreviewNode(
                    id=sid,
                    kind="state",
                    label=c.name,
                    value=c.inner.id,
                    dims=[list(c.inner.dims)],
                    cluster=cid,
                    returnn=Emitted(
                        name="/".join((*path, layer_name)),
                        kind=f"prev:{layer_name}",
                        code=_entry(layer_name, unit.layers[layer_name]),
                    ),
                    torch=Emitted(
                        name=var,
                        kind="torch.where",
                        code="\n".join(self.torch_lines_with(rf"^{re.escape(var)} = ")),
                    ),
                )
            )
            self.src[c.inner.id] = (sid, "data")
            self.edge(c.init, sid, "init", c.name)
        self.block(n.body, cid, path)
        for c in n.carries:
            sid = f"s{c.inner.id}"
            self.edge(c.next, sid, "state", c.name)
            state = self.nodes[sid]
            producer = self.nodes[self.src[c.next][0]]
            state.source = producer.source  # where the state's next value is assigned
            if c.out is not None:
                self.src[c.out.id] = (sid, "last")
        if n.end is not None:
            eid = f"e{cid}"
            end_var = self.tem.var[n.end]
            self.add(
                PreviewNode(
                    id=eid,
                    kind="end",
                    label="end",
                    value=n.end,
                    cluster=cid,
                    source=self.nodes[self.src[n.end][0]].source,
                    returnn=Emitted(name="/".join((*path, "end")), kind="end", code=_entry("end", unit.layers["end"])),
                    torch=Emitted(
                        name=end_var,
                        kind="break",
                        # a loop with `choice` ends in `search()` only: `forward` runs over its target
                        code="\n".join(self.torch_lines_with(rf"[(& ]{re.escape(end_var)}\)"))
                        if n.target is None
                        else "# ends each hypothesis in search(); forward runs over the target's frames",
                    ),
                )
            )
            self.edge(n.end, eid, "end")
            if n.bound is not None:
                self.edge(n.bound, eid, "end", "max steps")
        for s in n.stacks:
            self.src[s.out.id] = (self.src[s.value][0], "stack")
        for ll in n.lasts:
            self.src[ll.out.id] = (self.src[ll.value][0], "last")

"""A `Preview` → Graphviz dot text, in the RETURNN or the torch view (the same graph, each
node labelled with what that target emitted). Layout is Graphviz's; every user string is
quoted through `_quote`, so no name can break the dot syntax."""

from __future__ import annotations

from dataclasses import dataclass

from netc.ir.walk import ops
from netc.preview.model import Preview, PreviewCluster, PreviewEdge, PreviewNode

VIEWS = ("returnn", "torch")
MAX_LABEL = 48  # characters per node label line; longer text is cut (the page shows it whole)
MAX_CLUSTER_LABEL = 90

_NODE_STYLE = {
    "input": 'shape=box, style="rounded,filled,bold", fillcolor="#dff3e0", color="#2e7d32"',
    "op": 'shape=box, style="rounded,filled", fillcolor="#ffffff", color="#5f6368"',
    "state": 'shape=box, style="rounded,filled", fillcolor="#efe4fb", color="#6a3d9a", peripheries=2',
    "end": 'shape=diamond, style="filled", fillcolor="#fff3cd", color="#b8860b"',
    "output": 'shape=box, style="rounded,filled,bold", fillcolor="#dde8fb", color="#1f4e9c", peripheries=2',
    "loss": 'shape=octagon, style="filled,bold", fillcolor="#fde2e1", color="#b3261e"',
}
_HOISTED_STYLE = 'shape=box, style="rounded,filled,dashed", fillcolor="#fff8e1", color="#b8860b"'
_FUSED_STYLE = 'shape=box, style="rounded,filled,bold", fillcolor="#e6f4ea", color="#188038"'  # one native call
_EDGE_STYLE = {
    "data": 'color="#5f6368"',
    "invariant": 'color="#9aa0a6"',
    "frame": 'color="#2e7d32", fontcolor="#2e7d32"',
    "init": 'style=dotted, color="#6a3d9a", fontcolor="#6a3d9a"',
    # a state's next value flows back up: drawn dashed and bold, and not allowed to bend the layout
    "state": 'style="dashed,bold", color="#c2185b", fontcolor="#c2185b", constraint=false',
    "stack": 'color="#1f4e9c", fontcolor="#1f4e9c"',
    "last": 'color="#1f4e9c", fontcolor="#1f4e9c"',
    "end": 'color="#b8860b", fontcolor="#b8860b"',
}


def _quote(s: str) -> str:
    """A dot string literal: backslashes doubled (so no `\\l`-style escape reaches Graphviz), quotes escaped."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label(*lines: str, width: int = MAX_LABEL) -> str:
    cut = [(line if len(line) <= width else line[: width - 1] + "…").replace("\n", " ") for line in lines]
    return _quote("\n".join(cut)).replace("\n", "\\n")  # `\n` after quoting: dot's line break


def _dims(n: PreviewNode) -> str:
    return " ".join(f"[{', '.join(d)}]" for d in n.dims)


def node_label(n: PreviewNode, view: str) -> list[str]:
    emitted = n.returnn if view == "returnn" else n.torch
    dims = [_dims(n)] if n.dims else []
    if n.kind == "op":
        marks = [*(["↑ hoisted"] if n.hoisted_from else []), *([f"⇉ fused loop: {n.fused}"] if n.fused else [])]
        if emitted is None:  # no RETURNN layer does it
            return [*marks, n.label, "(no layer)", *dims]
        name = emitted.name.rsplit("/", 1)[-1]
        return [*marks, name, emitted.kind, *dims]
    if n.kind == "state":
        return [f"state {n.label}", emitted.kind if view == "returnn" else emitted.name, *dims]
    if n.kind == "end":
        return ["end"]
    return [f"{n.kind} {n.label}", *dims]


def edge_label(e: PreviewEdge, view: str, state: PreviewNode | None = None) -> str:
    """`state`: the state node a state edge goes to (RETURNN reads it as `prev:` its layer)."""
    if e.kind == "state":
        if view == "returnn":
            return state.returnn.kind if state is not None and state.returnn else f"prev:{e.label}"
        return f"next {e.label}"
    if e.kind == "init":
        return "initial"
    return {"frame": "frame", "stack": "stacked", "last": "last frame", "end": e.label}.get(e.kind, "")


def cluster_label(c: PreviewCluster, view: str) -> str:
    head = f"rec layer {c.returnn.name}" if view == "returnn" else c.torch.code.splitlines()[-1]
    return f"{head}  ·  {c.label}"


def returnn_boxes(p: Preview) -> dict[str, str]:
    """The RETURNN view draws one box per layer: node id -> the node whose box shows it (itself,
    or, for ops the emitter folded into one layer, that layer's loss, else its output, else its
    last op: the one whose result the layer is)."""
    layers: dict[str, list[PreviewNode]] = {}
    for n in p.nodes:
        if n.returnn is not None and n.kind in ("op", "output", "loss"):  # a state is `prev:` its layer
            layers.setdefault(n.returnn.name, []).append(n)
    box = {n.id: n.id for n in p.nodes}
    for members in layers.values():
        main = next((n for kind in ("loss", "output") for n in members if n.kind == kind), members[-1])
        for n in members:
            box[n.id] = main.id
    return box


@dataclass
class ModuleGroup:
    """The nodes of one module instance (the parent path of their parameters' modules, e.g.
    `lstm1` for `lstm1/fw` and `lstm1/bw`) in one loop: drawn as a box of their own."""

    id: str
    path: str
    cluster: str | None
    nodes: list[str]


def module_groups(p: Preview) -> list[ModuleGroup]:
    params = {n.outs[0].id: n.param.rsplit("/", 1)[0] for n in ops(p.ir.body) if n.param and "/" in n.param}
    found: dict[tuple[str, str | None], list[str]] = {}
    for n in p.nodes:
        if n.kind == "op" and n.value in params:
            found.setdefault((params[n.value], n.cluster), []).append(n.id)
    groups = [(path, cluster, ids) for (path, cluster), ids in found.items() if len(ids) > 1]
    return [ModuleGroup(f"m{k}", path, cluster, ids) for k, (path, cluster, ids) in enumerate(groups)]


def to_dot(p: Preview, view: str) -> str:
    prefix = view[0]  # SVG element ids: `r-v12`, `t-v12` (both views live in one page)
    box = returnn_boxes(p) if view == "returnn" else {n.id: n.id for n in p.nodes}
    by_id = {n.id: n for n in p.nodes}
    folded: dict[str, list[PreviewNode]] = {}
    for n in p.nodes:
        if box[n.id] != n.id:
            folded.setdefault(box[n.id], []).append(n)
    in_module: dict[str, str] = {}  # box -> its module group
    modules = module_groups(p)
    for m in modules:
        for nid in m.nodes:
            if by_id[box[nid]].cluster == m.cluster:
                in_module.setdefault(box[nid], m.id)
    by_cluster: dict[str | None, list[PreviewNode]] = {}
    for n in p.nodes:
        if box[n.id] == n.id:
            by_cluster.setdefault(in_module.get(n.id, n.cluster), []).append(n)
    children: dict[str | None, list[PreviewCluster]] = {}
    for c in p.clusters:
        children.setdefault(c.parent, []).append(c)
    for m in modules:
        if any(in_module.get(nid) == m.id for nid in by_id):
            children.setdefault(m.cluster, []).append(m)
    out = [
        "digraph netc {",
        '  graph [rankdir=TB, fontname="Helvetica", fontsize=11, nodesep=0.3, ranksep=0.35, bgcolor="transparent"];',
        '  node [fontname="Helvetica", fontsize=10, margin="0.12,0.05"];',
        '  edge [fontname="Helvetica", fontsize=9, arrowsize=0.7];',
    ]

    def nodes_and_clusters(cluster: str | None, indent: str) -> None:
        for n in by_cluster.get(cluster, []):
            style = _HOISTED_STYLE if n.hoisted_from else _FUSED_STYLE if n.fused else _NODE_STYLE[n.kind]
            classes = f"netc-node {n.kind}{' hoisted' if n.hoisted_from else ''}{' fused' if n.fused else ''}"
            label = node_label(n, view)
            if n.id in folded:  # the one layer of several ops: what else it does, under its class
                ops = ", ".join(dict.fromkeys(f.op or f.kind for f in folded[n.id]))
                label = [*label[:2], f"+ {ops}", *label[2:]]
            out.append(
                f'{indent}{_quote(n.id)} [id="{prefix}-{n.id}", class="{classes}", {style}, label={_label(*label)}];'
            )
        for c in children.get(cluster, []):
            out.append(f"{indent}subgraph {_quote('cluster_' + c.id)} {{")
            if isinstance(c, ModuleGroup):
                out.append(f'{indent}  id="{prefix}-{c.id}"; class="netc-cluster netc-module";')
                out.append(f'{indent}  style="rounded,dashed"; color="#9aa0a6"; penwidth=1;')
                out.append(f"{indent}  label={_label(f'module {c.path}', width=MAX_CLUSTER_LABEL)}; labeljust=l;")
                nodes_and_clusters(c.id, indent + "  ")
                out.append(f"{indent}}}")
                continue
            out.append(f'{indent}  id="{prefix}-{c.id}"; class="netc-cluster";')
            out.append(f'{indent}  style="rounded,filled"; fillcolor="#f5f6fb"; color="#8c8fbf"; penwidth=1.4;')
            out.append(f"{indent}  label={_label(cluster_label(c, view), width=MAX_CLUSTER_LABEL)}; labeljust=l;")
            nodes_and_clusters(c.id, indent + "  ")
            out.append(f"{indent}}}")

    nodes_and_clusters(None, "  ")
    for rank, kinds in (("source", ("input",)), ("sink", ("output", "loss"))):  # inputs on top, results below
        ids = [_quote(n.id) for n in by_cluster.get(None, []) if n.kind in kinds]
        if ids:
            out.append(f"  {{ rank={rank}; {' '.join(ids)}; }}")
    drawn: set[tuple[str, str, str, str]] = set()
    for e in p.edges:
        src, dst = box[e.src], box[e.dst]
        label = edge_label(e, view, by_id.get(e.dst))
        if src == dst or (src, dst, e.kind, label) in drawn:  # inside one layer, or drawn already
            continue
        drawn.add((src, dst, e.kind, label))
        out.append(
            f'  {_quote(src)} -> {_quote(dst)} [class="netc-edge {e.kind}", {_EDGE_STYLE[e.kind]}'
            + (f", label={_label(label)}" if label else "")
            + "];"
        )
    out.append("}")
    return "\n".join(out) + "\n"

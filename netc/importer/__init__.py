"""`netc import`: a RETURNN (TensorFlow net-dict) config to netc source.

`load` runs RETURNN's own `Config` in a subprocess and brings back data; `layers` maps each
layer to a statement; `writer` writes the model with libcst. The written model is compiled
once here: that checks it, and gives the name map from the original's TF variables to the
model's parameters (by the line of each module's construction)."""

from __future__ import annotations

import io
import os
import tokenize
from dataclasses import dataclass, field, replace

import libcst as cst

from netc.errors import CompileError, Span
from netc.importer.dims import BATCH
from netc.importer.fold import fold
from netc.importer.layers import Importer
from netc.importer.load import load_config
from netc.importer.syntax import identifier, name
from netc.importer.values import DIM, Refused
from netc.importer.writer import Assign, EndIf, Loop, MarkLoss, Model, write


@dataclass
class ImportResult:
    source: str
    function: str
    params: dict[str, dict] = field(
        default_factory=dict
    )  # original TF variable -> {"netc", "returnn", "torch", "shape"[, "transposed": the variable is the transpose]}
    outputs: dict[str, str] = field(default_factory=dict)  # original layer -> output name
    losses: dict[str, str] = field(default_factory=dict)  # original layer (`rec/sub` in units) -> loss name
    errors: list[CompileError] = field(default_factory=list)  # refused layers, located
    warnings: list[CompileError] = field(default_factory=list)  # imported layers RETURNN may compute otherwise
    notes: list[str] = field(default_factory=list)  # how the config was read, what was left out (one line each)


def import_config(
    path: str,
    sets: list[tuple[str, str]] = (),
    network: str = "network",
    python: str | None = None,
    no_exec: bool | None = None,
) -> ImportResult:
    return import_loaded(load_config(path, sets, network, python, no_exec), network)


def import_loaded(loaded, network: str = "network") -> ImportResult:
    """The model of a config `load_config` loaded."""
    path = loaded.path
    imp = Importer(loaded)
    _deep(imp.run, _count_layers(loaded.network))
    function = identifier(os.path.basename(path).split(".")[0]) or "imported"
    if function in imp.used:
        function += "_net"
    model = _model(imp, path, function)
    model.imports = _used_netc_names(model) | {"Dim", "batch", "network"}
    source = write(model)
    result = ImportResult(source, function, outputs=imp.outputs, losses=imp.loss_names)
    result.errors = [_locate(path, network, r) for r in imp.refused]
    result.warnings = [_locate(path, network, r) for r in imp.warnings]
    result.notes = [*loaded.notes, *imp.notes]
    if not imp.refused:
        result.params = _param_map(source, path, model)
    return result


def _count_layers(net: dict) -> int:
    """The layers of a net dict, those of its units and subnetworks too."""
    n, todo = 0, [net]
    while todo:
        layers = todo.pop()
        for d in layers.values():
            n += 1
            if isinstance(d, dict):
                todo += [v for k in ("unit", "subnetwork") if isinstance(v := d.get(k), dict)]
    return n


def _deep(fn, n_layers: int) -> None:
    """`fn()` where Python's recursion may go as deep as the network: the importer reads each layer's
    inputs before the layer (a chain of hundreds of layers), in a thread with a stack for that."""
    import sys
    import threading

    limit = max(sys.getrecursionlimit(), 1000 + 60 * n_layers)
    if limit == sys.getrecursionlimit():
        fn()
        return
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
            failure.append(e)

    old_limit, old_size = sys.getrecursionlimit(), threading.stack_size()
    sys.setrecursionlimit(limit)
    threading.stack_size(min(1 << 30, max(64 << 20, limit * 2048)))
    try:
        t = threading.Thread(target=run)
        t.start()
        t.join()
    finally:
        threading.stack_size(old_size)
        sys.setrecursionlimit(old_limit)
    if failure:
        raise failure[0]


def _model(imp: Importer, path: str, function: str) -> Model:
    dims = imp.dims
    variables = dims.variables(imp.used | {identifier(k) for k in imp.cfg.inputs} | {function})
    header = [f"Imported by `netc import` from {os.path.basename(path)}" + _sets_text(imp.cfg.sets) + "."]
    if imp.refused:
        header.append("Not imported (unsupported layers; the layers that read them are left out too):")
        header += [f"  {r.layer} ({r.cls}): {r.why}" for r in imp.refused]
    dim_decls = []
    first = [dims.find(x) for k in imp.input_order for x in (*imp.inputs[k].dims, imp.inputs[k].sparse) if x]
    order = sorted(variables, key=lambda k: first.index(k) if k in first else len(first))  # inputs' dims first
    for key in order:
        var = variables[key]
        d = dims.dims[key]
        dim_decls.append((var, d.name, d.size, None))
    params = []
    for key in sorted(imp.input_order, key=list(imp.cfg.inputs).index):  # extern_data's order
        val = imp.inputs[key]
        kind = "Labels" if val.sparse is not None else "Tensor"
        imp.imports.add(kind)
        entries = [dims.find(x) if x != BATCH else BATCH for x in val.dims] + ([val.sparse] if val.sparse else [])
        ann = cst.Subscript(name(kind), [cst.SubscriptElement(cst.Index(dims.expr(x, variables))) for x in entries])
        params.append((identifier(key), ann))
    resolve = _DimNames(dims, variables)
    body = _resolve_body(imp.top.stmts, resolve)
    outputs = [(out, imp.out_vals[out].expr) for out in imp.outputs.values()]
    if not outputs and not imp.refused:
        raise CompileError(
            None,
            "the network has no `output` layer, no `is_output_layer` and no layer with a loss: nothing to import",
            path,
        )
    used = imp.used | set(variables.values()) | {function}
    body, classes = fold(body, outputs, [p for p, _ in params], set(variables.values()), used, set(imp.cfg.network))
    return Model(function, header, imp.imports, dim_decls, params, body, outputs, classes)


def _used_netc_names(model: Model) -> set[str]:
    """The names of netc the model uses: what it imports."""
    import netc

    class Names(cst.CSTVisitor):
        def __init__(self):
            self.found: set[str] = set()

        def visit_Name(self, node: cst.Name) -> None:
            self.found.add(node.value)

    v = Names()
    for _, ann in model.params:
        ann.visit(v)

    def walk(stmts):
        for s in stmts:
            if isinstance(s, Loop):
                s.iterable.visit(v)
                walk(s.body)
            elif hasattr(s, "value"):
                s.value.visit(v)
                if getattr(s, "search", None) is not None:  # `if searching(): ... else: ...`
                    s.search.visit(v)
                    v.found.add("searching")
            elif isinstance(s, EndIf):
                s.cond.visit(v)
                v.found.add("end")
            if isinstance(s, MarkLoss):
                v.found.add("mark_as_loss")

    walk(model.body)
    for c in model.classes:
        for _, ctor in c.init:
            ctor.visit(v)
        walk(c.body)
        v.found.add("Module")
    return {n for n in v.found if n in netc.__all__}


def _sets_text(sets) -> str:
    return "".join(f" --set {k}={v}" for k, v in sets)


class _DimNames(cst.CSTTransformer):
    """`__dim__<key>` placeholders -> the dim's variable (or `a + b` for a derived one)."""

    def __init__(self, dims, variables):
        self.dims, self.variables = dims, variables

    def leave_Name(self, original: cst.Name, updated: cst.Name):
        if updated.value.startswith(DIM):
            return self.dims.expr(updated.value[len(DIM) :], self.variables)
        return updated


def _resolve_body(stmts: list, t: _DimNames) -> list:
    out = []
    for s in stmts:
        if isinstance(s, Assign):
            out.append(replace(s, value=s.value.visit(t), search=s.search and s.search.visit(t)))
        elif isinstance(s, MarkLoss):
            out.append(MarkLoss(s.value.visit(t), s.name, s.comment))
        elif isinstance(s, Loop):
            out.append(Loop(s.var, s.iterable.visit(t), _resolve_body(s.body, t), s.comment))
        else:
            out.append(s)
    return out


def _param_map(source: str, path: str, model: Model) -> dict[str, dict]:
    """Compile the written model; each of its parameters by the original's TF variable name."""
    import tempfile

    from netc.compiler import compile_graph

    with tempfile.TemporaryDirectory() as tmp:
        file = os.path.join(tmp, f"{model.function}.py")
        with open(file, "w", encoding="utf-8") as f:
            f.write(source)
        try:
            g = compile_graph(file)
        except CompileError as e:
            raise CompileError(
                None, f"netc import wrote a model that does not compile (a netc bug): {e.render(source)}", path
            ) from e
    from netc.emit_torch.emitter import param_attrs

    attrs = param_attrs(g.params)  # the torch module's state_dict keys
    out = {}
    for p in g.params:
        ref = model.module_paths[tuple(line for line, _ in p.call_path)]
        entry = {
            "netc": f"{p.path}/{p.role}",
            "returnn": p.name,
            "torch": attrs[(p.path, p.role)],
            "shape": [g.dim(d).size for d in p.dims],
        }
        if p.role in ref.transposed:  # RETURNN's `use_transposed_weights`: [out, in]
            entry["transposed"] = True
        if ref.leading_ones.get(p.role):  # [1, 1, feature] there: the same values
            entry["tf_shape"] = [1] * ref.leading_ones[p.role] + entry["shape"]
        out[f"{ref.tf_prefix}/{ref.tf_names.get(p.role, p.role)}"] = entry
    return out


def _locate(path: str, network: str, r: Refused) -> CompileError:
    """A refused layer at its name's string in the config (a `"name": {` entry), else at its
    class's string, else about the file."""
    layer = r.layer.rsplit("/", 1)[-1]
    spans = _string_spans(path)
    keys = [i for i, (text, _, is_key) in enumerate(spans) if text == layer and is_key]
    # the entry whose next `"class": ...` is the layer's class, else the first entry of that name
    of_class = [i for i in keys if _next_class(spans, i) == r.cls]
    for i in of_class + keys:
        return CompileError(spans[i][1], r.args[0])
    hits = [s for text, s, _ in spans if text == r.cls]
    return CompileError(hits[0], r.args[0]) if hits else CompileError(None, r.args[0], file=path)


def _next_class(spans: list, i: int) -> str | None:
    for j in range(i + 1, min(i + 40, len(spans) - 1)):
        if spans[j][0] == "class" and spans[j][2]:
            return spans[j + 1][0]
    return None


def _string_spans(path: str) -> list[tuple[str, Span, bool]]:
    """String literals of the config: (value, span, followed by `:`)."""
    import ast

    try:
        with open(path, encoding="utf-8") as f:
            tokens = list(tokenize.generate_tokens(io.StringIO(f.read()).readline))
    except (OSError, SyntaxError, tokenize.TokenError):
        return []
    out = []
    for i, tok in enumerate(tokens):
        if tok.type != tokenize.STRING:
            continue
        try:
            value = ast.literal_eval(tok.string)
        except (ValueError, SyntaxError):
            continue
        if not isinstance(value, str):
            continue
        nxt = next((t for t in tokens[i + 1 :] if t.type not in (tokenize.NL, tokenize.COMMENT)), None)
        span = Span(file=path, line=tok.start[0], col=tok.start[1], end_line=tok.end[0], end_col=tok.end[1])
        out.append((value, span, nxt is not None and nxt.string == ":"))
    return out

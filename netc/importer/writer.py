"""Writing the imported model as netc source with libcst: a statement tree (`Assign`, `Append`,
`MarkLoss`, `Loop`) in, source text and the line of each module's construction out."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from netc.importer.syntax import Expr, call, name, string


@dataclass
class ModuleRef:
    """A parameterised module the model constructs, and where RETURNN keeps its variables."""

    kind: str  # "linear", "embedding", "lstm", "lstm_cell"
    tf_prefix: str  # e.g. "enc_ctx", "lstm0_fw/rec", "output/rec/s/rec"
    tf_names: dict[str, str] = field(default_factory=dict)  # a role whose TF variable is named otherwise


@dataclass
class Assign:
    targets: list[str]
    value: Expr
    comment: str | None = None
    module: ModuleRef | None = None
    note: str | None = None  # a comment line above the statement (a warning)


@dataclass
class Append:
    target: str
    value: Expr


@dataclass
class MarkLoss:
    value: Expr
    name: str
    comment: str | None = None


@dataclass
class Loop:
    var: list[str]  # the frames (several: `zip`)
    iterable: Expr
    body: list
    comment: str | None = None


@dataclass
class EndIf:
    """`if end(cond): break`, a decoder loop's last statement."""

    cond: Expr


@dataclass
class Model:
    function: str
    header: list[str]  # comment lines, without `#`
    imports: set[str]
    dims: list[tuple[str, str, int | None, str | None]]  # variable, name, size, comment
    params: list[tuple[str, Expr]]  # input name, annotation
    body: list
    outputs: list[tuple[str, Expr]]
    module_lines: dict[int, ModuleRef] = field(default_factory=dict)  # filled by `write`


def _comment_line(text: str) -> cst.EmptyLine:
    return cst.EmptyLine(comment=cst.Comment(("# " + text).rstrip()))


def _simple(stmt: cst.BaseSmallStatement, comment: str | None) -> cst.SimpleStatementLine:
    trailing = cst.TrailingWhitespace(
        whitespace=cst.SimpleWhitespace("  " if comment else ""),
        comment=cst.Comment("# " + comment) if comment else None,
    )
    return cst.SimpleStatementLine([stmt], trailing_whitespace=trailing)


def _target(targets: list[str]) -> cst.BaseAssignTargetExpression:
    if len(targets) == 1:
        return name(targets[0])
    return cst.Tuple([cst.Element(name(t)) for t in targets], lpar=[], rpar=[])


def _stmts(items: list, modules: dict[int, ModuleRef]) -> list[cst.BaseStatement]:
    out: list[cst.BaseStatement] = []
    for s in items:
        if isinstance(s, Assign):
            node = _simple(cst.Assign([cst.AssignTarget(_target(s.targets))], s.value), s.comment)
            if s.note:
                node = node.with_changes(leading_lines=[_comment_line(s.note)])
            if s.module is not None:
                modules[id(node)] = s.module
            out.append(node)
        elif isinstance(s, Append):
            out.append(_simple(cst.Expr(call(cst.Attribute(name(s.target), name("append")), s.value)), None))
        elif isinstance(s, MarkLoss):
            out.append(_simple(cst.Expr(call("mark_as_loss", s.value, string(s.name))), s.comment))
        elif isinstance(s, Loop):
            body = cst.IndentedBlock(_stmts(s.body, modules))
            loop = cst.For(target=_target(s.var), iter=s.iterable, body=body)
            if s.comment:
                loop = loop.with_changes(leading_lines=[_comment_line(s.comment)])
            out.append(loop)
        elif isinstance(s, EndIf):
            brk = cst.IndentedBlock([cst.SimpleStatementLine([cst.Break()])])
            out.append(cst.If(test=call("end", s.cond), body=brk))
        else:
            raise TypeError(s)
    return out


def write(model: Model) -> str:
    """The model's source; `model.module_lines` gets the line of each module's statement."""
    modules: dict[int, ModuleRef] = {}
    header = [_comment_line(line) for line in model.header]
    imports = cst.SimpleStatementLine(
        [
            cst.ImportFrom(
                module=name("netc"),
                names=[cst.ImportAlias(name(n)) for n in sorted(model.imports)],
            )
        ],
        leading_lines=header + ([cst.EmptyLine()] if header else []),
    )
    dims = []
    for i, (var, dim_name, size, comment) in enumerate(model.dims):
        args = [string(dim_name)] + ([cst.Integer(str(size))] if size is not None else [])
        node = _simple(cst.Assign([cst.AssignTarget(name(var))], call("Dim", *args)), comment)
        if i == 0:
            node = node.with_changes(leading_lines=[cst.EmptyLine()])
        dims.append(node)
    params = cst.Parameters([cst.Param(name(p), annotation=cst.Annotation(ann)) for p, ann in model.params])
    ret = cst.Dict(
        [cst.DictElement(string(k), v) for k, v in model.outputs],
    )
    body = _stmts(model.body, modules) + [cst.SimpleStatementLine([cst.Return(ret)])]
    fn = cst.FunctionDef(
        name=name(model.function),
        params=params,
        body=cst.IndentedBlock(body),
        decorators=[cst.Decorator(name("network"))],
        leading_lines=[cst.EmptyLine(), cst.EmptyLine()],
    )
    module = cst.Module(body=[imports, *dims, fn])
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    model.module_lines = {}
    for node, pos in positions.items():
        if id(node) in modules:
            model.module_lines[pos.start.line] = modules[id(node)]
    return module.code

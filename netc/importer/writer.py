"""Writing the imported model as netc source with libcst: a statement tree (`Assign`, `Append`,
`MarkLoss`, `Loop`, `Instance`s of folded `Module` classes) in, source text and the call path
(lines) of each module's construction out."""

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
    transposed: frozenset[str] = frozenset()  # roles whose TF variable is the parameter transposed
    # roles whose TF variable has leading axes of size 1 (RETURNN's batch norm before param
    # version 2: [1, 1, feature]): how many
    leading_ones: dict[str, int] = field(default_factory=dict)


@dataclass
class Assign:
    targets: list[str]
    value: Expr
    comment: str | None = None
    module: ModuleRef | None = None
    note: str | None = None  # a comment line above the statement (a warning)
    # `if searching(): targets = search` `else: targets = value`: a decoder step's value that
    # reads its target's frame in training (`x[i]`), which a search computes without
    search: Expr | None = None


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
    classes: list = field(default_factory=list)  # folded `Module` classes (fold.ClassDef)
    # filled by `write`: the lines of a module's call path (the statement; an instance's, then
    # its attribute's in `__init__`) -> where RETURNN keeps its variables
    module_paths: dict[tuple[int, ...], ModuleRef] = field(default_factory=dict)


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


def _stmts(items: list, modules: dict[int, object]) -> list[cst.BaseStatement]:
    from netc.importer.fold import Instance

    out: list[cst.BaseStatement] = []
    for s in items:
        if isinstance(s, Instance):
            node = _simple(cst.Assign([cst.AssignTarget(name(s.var))], call(s.cls)), s.comment)
            modules[id(node)] = s
            out.append(node)
        elif isinstance(s, Assign) and s.search is not None:
            search = _simple(cst.Assign([cst.AssignTarget(_target(s.targets))], s.search), s.comment)
            train = _simple(cst.Assign([cst.AssignTarget(_target(s.targets))], s.value), None)
            node = cst.If(call("searching"), cst.IndentedBlock([search]), orelse=cst.Else(cst.IndentedBlock([train])))
            out.append(node.with_changes(leading_lines=[_comment_line(s.note)]) if s.note else node)
        elif isinstance(s, Assign):
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


def _class(c, modules: dict[int, object]) -> cst.ClassDef:
    """A folded `Module` class: its constructions in `__init__`, the statements in `__call__`."""
    self_ = cst.Param(name("self"))
    init = []
    for attr, ctor in c.init:
        node = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Attribute(name("self"), name(attr)))], ctor)])
        modules[id(node)] = (c.name, attr)
        init.append(node)
    ret = name(c.returns[0]) if len(c.returns) == 1 else _target(c.returns)
    body = _stmts(c.body, modules) + [cst.SimpleStatementLine([cst.Return(ret)])]
    params = cst.Parameters([self_, *(cst.Param(name(p)) for p in c.params)])
    return cst.ClassDef(
        name=name(c.name),
        bases=[cst.Arg(name("Module"))],
        body=cst.IndentedBlock(
            [
                cst.FunctionDef(name("__init__"), cst.Parameters([self_]), cst.IndentedBlock(init)),
                cst.FunctionDef(
                    name("__call__"), params, cst.IndentedBlock(body), leading_lines=[cst.EmptyLine(indent=False)]
                ),
            ]
        ),
        leading_lines=[cst.EmptyLine(), cst.EmptyLine()],
    )


def write(model: Model) -> str:
    """The model's source; `model.module_paths` gets the lines of each module's call path."""
    from netc.importer.fold import Instance

    modules: dict[int, object] = {}
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
    classes = [_class(c, modules) for c in model.classes]
    module = cst.Module(body=[imports, *dims, *classes, fn])
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    model.module_paths = {}
    attr_lines: dict[tuple[str, str], int] = {}
    instances: list[tuple[int, Instance]] = []
    for node, pos in positions.items():
        what = modules.get(id(node))
        if isinstance(what, ModuleRef):
            model.module_paths[(pos.start.line,)] = what
        elif isinstance(what, tuple):
            attr_lines[what] = pos.start.line
        elif isinstance(what, Instance):
            instances.append((pos.start.line, what))
    for line, inst in instances:
        for attr, ref in inst.members.items():
            model.module_paths[(line, attr_lines[(inst.cls, attr)])] = ref
    return module.code

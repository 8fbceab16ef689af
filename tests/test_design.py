"""The design's measure (docs/design.md, "Where a new loop kind goes"): a loop kind lives in its
own files, and the generic code finds it through the registries (the op registry, the loop
iterables of `netc.ops.iterables`, `OpDef.loop_role`), not by its names. Checked on the chunked
loop: the files of netc whose code names what is the chunked kind's own (its ops, its iterable,
its modules, its functions and classes) are its four."""

from __future__ import annotations

import ast
import re

from conftest import ROOT

from netc.ops import ITERABLES, REGISTRY

# the chunked loop kind's files: its ops, its descriptor in the IR's loop kinds, its parser
# rules, and the one loop lowering it changes
CHUNK_FILES = {"netc/ops/chunk.py", "netc/ir/loopkinds.py", "netc/parser/chunk.py", "netc/emit_tf/loops.py"}
CHUNK_MODULES = {"netc.ops.chunk", "netc.parser.chunk"}
# loopkinds' descriptor of the kind
LOOPKINDS_NAMES = {"CHUNK", "LoopChunk", "loop_chunk", "chunk_dims", "chunks_op"}


def _own(module: str) -> set[str]:
    """What a kind's module defines at its top level that another module could name."""
    tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    # `RULES`: every rules module's (what `netc.parser.iterables` reads by that name)
    return {n for n in names if not n.startswith("_")} - {"RULES"}


def chunk_names() -> tuple[set[str], set[str]]:
    """(identifiers, strings) that are the chunked kind's own."""
    ops = {name for name, d in REGISTRY.items() if type(d).__module__ == "netc.ops.chunk"}
    iterables = {name for name, d in ITERABLES.items() if type(d).__module__ == "netc.ops.chunk"}
    assert ops and iterables, (ops, iterables)
    idents = set().union(*map(_own, CHUNK_MODULES)) | LOOPKINDS_NAMES | iterables
    return idents, ops | iterables | CHUNK_MODULES


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                found.add(id(body[0].value))
    return found


def names_in(source: str, idents: set[str], strings: set[str]) -> set[str]:
    """Which of these a Python file's code names (not its comments or docstrings): identifiers
    read, defined, imported or set as attributes, strings it holds, modules it imports."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.alias):
            found.add(node.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            found.add(node.value)
    return (found & idents) | (found & strings)


def test_the_check_finds_a_kind_named_by_its_code():
    """The check can fail: code naming the kind's op, function or module is found, a comment or
    docstring naming it is not."""
    idents, strings = chunk_names()
    assert {"chunk_split", "loop_chunk", "Chunks", "ChunkSpec", "chunks"} <= idents | strings
    assert names_in('if op.op == "chunk_merge":\n    pass\n', idents, strings) == {"chunk_merge"}
    assert names_in("from netc.ir.loopkinds import loop_chunk\n", idents, strings) == {"loop_chunk"}
    assert names_in("from netc.parser import chunk as C\n", idents, strings) == {"netc.parser.chunk"}
    assert names_in('x = d["chunks"]\n', idents, strings) == {"chunks"}
    assert names_in('"""the chunked loop (`chunks`, `chunk_split`)"""\n# loop_chunk\nx = 1\n', idents, strings) == set()


def test_only_the_chunked_kinds_own_files_name_it():
    idents, strings = chunk_names()
    # ("chunk": a module imported by name, `from netc.ops import chunk`)
    words = re.compile("|".join(rf"\b{re.escape(w)}\b" for w in sorted(idents | strings | {"chunk"})))
    naming = {}
    for path in sorted([*(ROOT / "netc").rglob("*.py"), *(ROOT / "netc_runtime").rglob("*.py")]):
        text = path.read_text(encoding="utf-8")
        found = names_in(text, idents, strings) if words.search(text) else set()  # (parsed only if it may)
        if found:
            naming[path.relative_to(ROOT).as_posix()] = sorted(found)
    assert set(naming) <= CHUNK_FILES, {f: n for f, n in naming.items() if f not in CHUNK_FILES}
    assert {"netc/ops/chunk.py", "netc/parser/chunk.py", "netc/ir/loopkinds.py"} <= set(naming)

"""The IR's loop kinds (`netc.ir.loopkinds`) and its walker (`netc.ir.walk`) on real models."""

from __future__ import annotations

from conftest import EXAMPLES, ROOT

from netc.compiler import compile_graph
from netc.ir.loopkinds import (
    ROLES,
    choice_op,
    chunk_dims,
    dim_table,
    grow_starts,
    growing_dims,
    kinds,
    loop_chunk,
    loop_grows,
    loop_search,
)
from netc.ir.model import Loop
from netc.ir.walk import loops, ops, walk
from netc.ops import REGISTRY
from netc.parser import parse_file


def test_every_op_role_is_a_kind_the_ir_knows():
    roles = {d.loop_role for d in REGISTRY.values()}
    assert roles - {None} <= ROLES
    assert roles >= ROLES  # each role has an op


def test_grown_states_and_the_search_of_a_decoder():
    """Parsed: the decoder's two self-attention states grow along `hist`, its loop searches; in
    training's graph the choice has gone (teacher forcing), the search graph keeps it."""
    path = str(ROOT / "tests" / "models" / "grow_decoder.py")
    g = parse_file(path)
    (loop,) = loops(g.body)
    assert growing_dims(g.body) == {"hist"}
    grown = loop_grows(loop)
    assert [gr.carry.name for gr in grown] == ["keys", "values"]
    assert all(gr.axis == "hist" and gr.carry.init in grow_starts(g.body) for gr in grown)
    search = loop_search(loop)
    assert search is not None and search.choices == (choice_op(loop),) and choice_op(loop) is not None
    assert {"carry", "stack", "end", "bound", "grow", "search"} <= set(kinds(loop))

    compiled = compile_graph(path)
    (trained,) = (n for n in compiled.body if isinstance(n, Loop))
    assert loop_search(trained) is None and choice_op(trained) is None  # an ordinary loop over the labels
    (searched,) = (n for n in compiled.search.body if isinstance(n, Loop))
    assert len(loop_search(searched).choices) == 1 and len(loop_grows(searched)) == 2


def test_plain_and_reverse_loops_have_no_grown_state_or_search():
    g = compile_graph(str(EXAMPLES / "bidirectional.py"))
    found = list(loops(g.body, unfused=True))
    assert found and not growing_dims(g.body)
    assert all(not loop_grows(n) and loop_search(n) is None for n in found)
    assert any("reverse" in kinds(n) for n in found)


def test_a_chunked_loop():
    """The chunked loop steps over the chunks' own dim; its chunk dim has another length at each
    step (kept out of hoisting, as a grown dim); the appended frames come back over `time`."""
    g = compile_graph(str(ROOT / "tests" / "models" / "chunked_rnn.py"))
    (loop,) = loops(g.body)
    chunk = loop_chunk(loop)
    assert chunk is not None and (chunk.axis, chunk.chunk, chunk.size) == ("time", "chunk", 3)
    assert loop.axis == "time_chunks" and "chunk" in kinds(loop)
    assert chunk_dims(g.body) == {"chunk"} <= dim_table(g).growing
    assert g.dim("chunk").kind == "dynamic" and g.dim(chunk.pad).size == 3
    frames = next(o for o in g.outputs if o.name == "frames")
    assert next(v for v in (op.outs[0] for op in ops(g.body)) if v.id == frames.value).dims == (
        "batch",
        "time",
        "hidden",
    )
    plain = compile_graph(str(EXAMPLES / "bidirectional.py"))
    assert all(loop_chunk(n) is None for n in loops(plain.body, unfused=True)) and not chunk_dims(plain.body)


def test_walk_visits_each_node_once_in_program_order():
    g = parse_file(str(ROOT / "tests" / "models" / "nested_reads_outer_frame.py"))
    seen = list(walk(g.body))
    assert len({id(n) for n in seen}) == len(seen)
    outer = next(n for n in g.body if isinstance(n, Loop))
    inner = next(n for n in outer.body if isinstance(n, Loop))
    assert seen.index(outer) < seen.index(inner) < seen.index(inner.body[0])
    assert [n for n in seen if isinstance(n, Loop)] == list(loops(g.body)) == [outer, inner]
    assert len(list(ops(g.body))) == len(seen) - 2

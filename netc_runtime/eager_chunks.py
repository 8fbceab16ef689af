"""Chunked loops eagerly: `for c in chunks(x, chunk):` runs as Python, a chunk of N frames of
this sequence per step (its last chunk shorter), each over the dynamic `chunk` dim with the
chunk's own length; a list appended over `chunk` is stacked back over x's dim (`eager.stack_list`)."""

from __future__ import annotations

from typing import Any

from netc.dsl import Dim
from netc.ir.loopkinds import loop_chunk
from netc_runtime.eager import ETensor, _run, stack_list
from netc_runtime.eager_loops import _loops, run_loop


def chunks(x: Any, chunk: Dim, axis: Dim | None = None) -> _Chunked:
    x = stack_list(x) if isinstance(x, list) else x
    return _Chunked(x, chunk, x._dyn() if axis is None else axis.name)


class _Chunked:
    def __init__(self, x: ETensor, chunk: Dim, axis: str):
        if not isinstance(chunk, Dim) or chunk.size is None:
            raise TypeError("chunks(x, chunk) needs a static Dim for the chunk's frames")
        self.x, self.chunk, self.axis = x, chunk, axis

    def __iter__(self):
        run = _run()
        found = [n for n in _loops(run.graph()) if (c := loop_chunk(n)) is not None and c.chunk == self.chunk.name]
        tag = run.tag(found[0].axis if found else f"{self.axis}_chunks", False)
        tag.chunk = (self.axis, self.chunk.name)
        return run_loop(run, tag, self._frames(run))

    def _frames(self, run):
        x, n, chunk = self.x, self.chunk.size, self.chunk.name
        pos = x.dims.index(self.axis)
        total = x.data.shape[pos]
        have = tuple(chunk if d == self.axis else d for d in x.dims)
        dims = run.net.dims.canonical(have)
        perm = [have.index(d) for d in dims]
        for start in range(0, total, n):
            k = min(n, total - start)
            run.lengths[chunk] = k
            yield ETensor(x.data.narrow(pos, start, k).permute(perm), dims, run.frames(), x.sparse_dim)

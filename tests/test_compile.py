"""`torch.compile` of every example's inference module with `--loops scan`: one whole graph
(`fullgraph=True`) with dynamic batch and lengths, whose loops are torch's `scan`/`while_loop`
operators, not unrolled: at three batches of other sizes and lengths it gives the default
module's results from the one graph dynamo traced first (no recompiling for a new length; dims
of equal size in the first batch are not assumed equal: `use_duck_shape=False`; sizes 0 and 1
are not special cases, `backed_size_oblivious`, as `netc export --format torch-export` traces:
a chunked loop's batch that fits in one chunk runs on the same graph). Backend `aot_eager`: dynamo's
and AOTAutograd's capture, which inductor compiles from (its code generation for each example
would cost minutes in CI; docs/targets.md has inductor's numbers)."""

from __future__ import annotations

import pytest
import torch
from conftest import EXAMPLES, example_network, one_chunk

from netc.compiler import compile_graph
from netc.emit_torch.lowering import lowered, torch_options
from netc.ir.model import Loop
from netc.passes.pipeline import PassOptions
from netc_runtime.export import _example, build, example_inputs

# conformer_aed's decoder grows its self-attention keys with `cum_concat`, which no torch loop
# operator carries (its shape changes from step to step): a Python loop, unrolled
UNROLLED = {"conformer_aed.py"}
PATHS = [p for p in sorted(EXAMPLES.glob("*.py")) if p.name not in UNROLLED]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_compiled_module_is_one_graph_for_any_length(path):
    network = example_network(path)
    g = compile_graph(str(path), network=network, options=PassOptions(fuse=False, targets=torch_options("scan")))
    assert all(lowered(g).scanned(n) for n in g.body if isinstance(n, Loop))
    wrapped, sig = build(g, as_dict=True)
    reference, _ = build(compile_graph(str(path), network=network), as_dict=True)
    graphs = []

    def backend(gm, example):
        graphs.append(gm)
        from torch._dynamo.backends.registry import lookup_backend

        return lookup_backend("aot_eager")(gm, example)

    torch._dynamo.reset()
    compiled = torch.compile(wrapped, fullgraph=True, dynamic=True, backend=backend)
    # first the batch `netc export` traces on (no dim of size 0 or 1, which torch would fix)
    batches = [_example(g, sig, 0), *(example_inputs(g, sig, b, n, seed) for b, n, seed in ((5, 11, 2), (2, 16, 3)))]
    if (n := one_chunk(g)) is not None:  # a batch whose longest sequence fits in one chunk: no new graph
        batches.append(example_inputs(g, sig, 3, n, 4))
    for arrays in batches:
        inputs = {k: torch.as_tensor(v) for k, v in arrays.items()}
        with torch.no_grad(), torch.fx.experimental._config.patch(use_duck_shape=False, backed_size_oblivious=True):
            got, ref = compiled(**inputs), reference(**inputs)
        assert set(got) == set(ref)
        for k, r in ref.items():  # padded frames too: the scan runs the default module's steps
            assert got[k].shape == r.shape, k
            assert r.numel() == 0 or float((got[k].double() - r.double()).abs().max()) <= 1e-5, k
    assert len(graphs) == 1, len(graphs)


def test_unrolled_examples_are_the_ones_with_a_loop_torch_cannot_scan():
    for name in UNROLLED:
        path = EXAMPLES / name
        g = compile_graph(
            str(path), network=example_network(path), options=PassOptions(fuse=False, targets=torch_options("scan"))
        )
        assert not all(lowered(g).scanned(n) for n in g.body if isinstance(n, Loop)), name

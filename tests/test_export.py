"""`torch.export` of the module emitted with `--loops scan`, for every example and the test models
of what export meets (EXPORTED: every op model, and those with a `while` loop, a loop that cannot
scan, or an op whose torch code export once fixed a dim for; the others' scan form is checked
against the default module in test_scan.py): its loops are torch's `scan` (and `while_loop`)
operator, so the exported program keeps the batch and every dynamic
dim dynamic; it runs at two other batch sizes and lengths than the export's example (and a
model with a chunked loop on a batch whose longest sequence fits in one chunk) and gives
what the default module (Python loops) gives on valid frames. A model whose loop cannot be a
`scan` is refused with a located error; the models in OP_LIMITS fail for their ops, as documented
in docs/targets.md (Deploying)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from conftest import EXAMPLES, ROOT, example_network, one_chunk
from test_models import MODELS

from netc.compiler import compile_graph
from netc.emit_torch.lowering import lowered, torch_options
from netc.emit_torch.scan_loops import blocker, while_dims
from netc.errors import CompileError
from netc.ir.model import Loop
from netc.ir.search import search_plan
from netc.passes.pipeline import PassOptions
from netc_runtime.backends import valid_mask
from netc_runtime.export import build, check, example_inputs, export, load

# a loop with `end`, a state grown in a loop, ops that make or pick frames, fused and native cells, losses
_MEETS_EXPORT = re.compile(
    r"\bend\(|cum_concat|\bwhile\b|Conv1d|max_pool|pad_frames|slice_frames|shift_right|replace_dim|Lstm\(|GruCell"
    r"|rel_|ctc_loss|rnnt_loss"
)
EXPORTED = [
    ROOT / "tests" / "models" / m
    for m in MODELS
    if m.startswith("ops_") or _MEETS_EXPORT.search((ROOT / "tests" / "models" / m).read_text())
]
PATHS = EXPORTED + sorted(EXAMPLES.glob("*.py"))

# ops whose torch code makes torch.export fix a dim or a relation between dims (export's
# message, at the export or when the program runs at another length)
OP_LIMITS = {
    "ops_losses.py": "aten._ctc_loss",  # no shape rule for CTC under export
    "ctc_input_labels.py": "aten._ctc_loss",
    "ops_rnnt_loss.py": "Guard failed",  # the RNN-T loss's lattice
    "rnnt_linear.py": "Guard failed",
    # torch.export assumes no dynamic size is 1: a batch whose longest sequence fits in one
    # frame of `fit_frames`' strided source fails its guard (docs/targets.md)
    "fit_frames.py": "Guard failed",
}


# ops export refuses with a located error (netc_runtime.export._NO_TORCH_EXPORT)
OP_REFUSED = {"ctc_decoding.py": ("ctc_prefix_search(", "CTC decoding gives a number of labels that depends on values")}


def _loops(nodes):
    for n in nodes:
        if isinstance(n, Loop):
            yield n
            yield from _loops(n.body)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_torch_export_runs_at_other_lengths(tmp_path, path):
    network = example_network(path) if path.parent == EXAMPLES else None
    g = compile_graph(str(path), network=network, options=PassOptions(fuse=False, targets=torch_options("scan")))
    out = str(tmp_path / "m.pt2")
    made = while_dims(g)
    if path.name in OP_REFUSED:
        with pytest.raises(CompileError) as e:
            export(g, "torch-export", out)
        op, why = OP_REFUSED[path.name]
        assert op in path.read_text().splitlines()[e.value.span.line - 1]
        assert e.value.message.startswith(f"--format torch-export: {why}")
        return
    blocked = [b for n in g.body if isinstance(n, Loop) and (b := blocker(n, made)) is not None]
    if blocked:  # a loop torch cannot scan: refused where the reason is
        with pytest.raises(CompileError) as e:
            export(g, "torch-export", out)
        assert e.value.span == blocked[0][0] and "neither torch's `scan` nor its `while_loop` runs" in e.value.message
        return
    assert all(lowered(g).scanned(n) for n in _loops(g.body))
    reference = compile_graph(str(path), network=network)  # the default module: Python loops
    wrapped, sig = build(reference, as_dict=True)
    batches = [
        example_inputs(reference, sig, batch, max_len, seed) for batch, max_len, seed in ((2, 9, 11), (5, 3, 12))
    ]
    if (n := one_chunk(reference)) is not None:  # a batch whose longest sequence fits in one chunk
        batches.append(example_inputs(reference, sig, 3, n, 13))
    if path.name in OP_LIMITS:
        with pytest.raises(Exception, match=OP_LIMITS[path.name]):
            run = load("torch-export", out, export(g, "torch-export", out))
            for inputs in batches:
                run(inputs)
        return
    _compare(g, load("torch-export", out, export(g, "torch-export", out)), wrapped, sig, batches)


def _compare(g, run, wrapped, sig, batches) -> None:
    """The exported program `run` gives what the default module `wrapped` gives on valid frames."""
    for inputs in batches:
        with torch.no_grad():
            ref = {k: v.numpy() for k, v in wrapped(**{k: torch.as_tensor(v) for k, v in inputs.items()}).items()}
        got = run(inputs)
        lens = {d: inputs[f"{d}_lens"] for d in sig.dyn}
        lens.update({d.name: ref[f"{d.name}_lens"] for d in g.dims if f"{d.name}_lens" in ref})
        assert set(got) == set(ref)
        for name, dims in sig.outputs:
            r, o = ref[name], got[name]
            assert o.shape == r.shape and o.dtype == r.dtype, name
            valid = valid_mask(dims, lens, g, r.shape) if dims else np.ones(r.shape, dtype=bool)
            assert float(np.abs(r.astype(np.float64) - o.astype(np.float64))[valid].max(initial=0.0)) <= 1e-4, name


# every example with `choice` (the transducer's search network), one export each
SEARCHES = [
    ("beam_search.py", None),
    ("librispeech_2018.py", None),
    ("conformer_transducer.py", "conformer_transducer_search"),
    ("conformer_aed.py", "conformer_aed"),
]


@pytest.mark.parametrize("name,network", SEARCHES, ids=[n for n, _ in SEARCHES])
def test_torch_export_of_a_beam_search(tmp_path, name, network):
    """`--search`: the beam loop is torch's `while_loop` (the steps written into buffers as long
    as the step limit, the best hypotheses followed back by a second one); the exported program
    passes export's own check (batch 4) and gives the default module's best hypotheses at two
    other batch sizes and lengths. A decoder's state grown by `cum_concat` (conformer_aed's
    self-attention) is a buffer as long as the step limit, written at each step."""
    path = EXAMPLES / name
    g = compile_graph(str(path), network=network, options=PassOptions(fuse=False, targets=torch_options("scan")))
    out = str(tmp_path / "m.pt2")
    assert lowered(g.search or g).scanned(search_plan(g).loop)
    sig = export(g, "torch-export", out, search=True)
    run = load("torch-export", out, sig)  # loaded once (seconds for the larger examples)
    assert check(g, "torch-export", out, search=True, run=run).max_abs_diff <= 1e-4
    reference = compile_graph(str(path), network=network)
    wrapped, ref_sig = build(reference, search=True, as_dict=True)
    assert ref_sig == sig
    batches = [
        example_inputs(reference, sig, batch, max_len, seed) for batch, max_len, seed in ((2, 9, 11), (5, 3, 12))
    ]
    if (n := one_chunk(reference)) is not None:  # a batch whose longest sequence fits in one chunk
        batches.append(example_inputs(reference, sig, 3, n, 13))
    _compare(reference, run, wrapped, sig, batches)


def test_op_limits_are_models_here():
    assert set(OP_LIMITS) <= {p.name for p in PATHS}

"""`netc export --streaming`: the step module (and a transducer's decoder) and their sidecars."""

from __future__ import annotations

import copy

import click

from netc.errors import CompileError


def _show(sizes: dict[str, int | None], items) -> str:
    return ", ".join(f"{n}[{', '.join(d if sizes.get(d) is None else str(sizes[d]) for d in ds)}]" for n, ds in items)


def _report(written, graph, what: str, fmt: str) -> None:
    sizes = {d.name: d.size for d in graph.dims}
    sig = written.sig
    inputs = [(n, ds) for n, ds in sig.inputs if n not in sig.left_out]
    outputs = [(sig.renamed.get(n, n), ds) for n, ds in sig.outputs]
    click.echo(f"wrote {written.path} ({fmt}, {what}): ({_show(sizes, inputs)}) -> ({_show(sizes, outputs)})")
    click.echo(f"checked: batch 4: max|Δ| = {written.checked.max_abs_diff:.3e} vs torch")


def export_streaming(
    model: str,
    network: str | None,
    fmt: str,
    output: str,
    params_path: str | None,
    seed: int,
    axis: str | None,
    outputs: list[str] | None,
    whole_encoder: bool,
) -> None:
    """Compile MODEL as written (no hoisting or fusing) and write its step module to `output`
    with `<output>.json`; a network with `transducer_search`: its encoder's step module (or,
    with `whole_encoder`, its encoder as a whole-sequence module) there, and the prediction
    and joint networks as `<stem>.predict<ext>`, `<stem>.joint<ext>` with `<stem>.decoder.json`."""
    from pathlib import Path

    from netc.cli_common import _graph
    from netc.ir.model import Output
    from netc.outputs import prepare
    from netc.passes import dce
    from netc.passes.inference import inference_graph
    from netc.stream import step_graph
    from netc_runtime.stream_export import transducer_op, write_decoder, write_module, write_step

    g = _graph(model, network, hoist=False, whole_sequence=False, fuse=False)
    full = inference_graph(g)
    op = transducer_op(full)
    prepare(output)
    if op is None and whole_encoder:
        raise ValueError(f"--whole-encoder: `{g.network}` has no transducer_search (whose encoder it writes whole)")
    if op is not None and outputs:
        raise ValueError(f"--outputs: `{g.network}` streams its encoder and decoder (transducer_search), not outputs")
    if op is None:
        unknown = [n for n in outputs or [] if n not in {o.name for o in full.outputs}]
        if unknown:
            raise ValueError(f"--outputs: `{g.network}` has no output {', '.join(map(repr, unknown))}")
        plan = step_graph(full, axis, outputs)
        written = write_step(plan, g, fmt, output, params_path, seed)
        _report(written, plan.graph, f"a step over `{plan.axis}`", fmt)
        click.echo(f"caches: {', '.join(c.name for c in plan.caches) or 'none'}; sidecar {output}.json")
        return
    enc = copy.deepcopy(full)
    enc.outputs = [Output(name="encoder", value=op.args[0])]
    enc, _ = dce.transform(enc)
    if whole_encoder:
        _report(write_module(enc, g, fmt, output, params_path, seed), enc, "the whole-sequence encoder", fmt)
    else:
        try:
            plan = step_graph(enc, axis or op.attrs["axis"])
        except CompileError as e:
            hint = " (--whole-encoder writes the encoder as a whole-sequence module; the decoder streams)"
            raise CompileError(e.span, e.message + hint, file=e.file) from None
        written = write_step(plan, g, fmt, output, params_path, seed)
        _report(written, plan.graph, f"the encoder's step over `{plan.axis}`", fmt)
        click.echo(f"caches: {', '.join(c.name for c in plan.caches) or 'none'}; sidecar {output}.json")
    stem = str(Path(output).with_suffix(""))
    pred_w, joint_w = write_decoder(full, op, fmt, output, params_path, seed, f"{stem}.decoder.json")
    for w, what in ((pred_w, "the prediction network"), (joint_w, "the joint network")):
        _report(w, full, what, fmt)
    click.echo(f"decoder: {stem}.decoder.json ({op.attrs['method']} search, beam {op.attrs['beam']}, on the host)")

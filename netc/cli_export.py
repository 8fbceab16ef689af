"""`netc export`: the model's torch module with parameters, as a file that runs without netc."""

from __future__ import annotations

from pathlib import Path

import click

from netc.cli_common import _pass_options

FORMATS = ("onnx", "torchscript", "torch-export")


@click.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(FORMATS), required=True, help="What to write (docs/targets.md).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True, help="The file (its folder is made).")
@click.option(
    "--params",
    "params_path",
    type=click.Path(exists=True, dir_okay=False),
    help="npz with param:<RETURNN variable name> (as `netc run` reads it); others are drawn randomly.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for parameters not given.")
@click.option("--network", help="The @network function, when the file has several.")
@click.option("--search", is_flag=True, help="Export the beam search (a model with `choice`) instead of forward.")
@click.option(
    "--streaming",
    is_flag=True,
    help="Export one step of the network's loop, its states as explicit caches (and a transducer's decoder), "
    "with a JSON sidecar (docs/targets.md).",
)
@click.option("--axis", help="--streaming: the dim a step advances over (default: the loops').")
@click.option(
    "--outputs",
    "only_outputs",
    help="--streaming: the outputs the step module returns, comma-separated (default: all).",
)
@click.option(
    "--whole-encoder",
    is_flag=True,
    help="--streaming, a network with transducer_search: its encoder as a whole-sequence module.",
)
@_pass_options
@click.option(
    "-v", "--verbose", is_flag=True, help="On a failure, also the traceback (of the exporter, framework or netc)."
)
def export(
    model: str,
    fmt: str,
    output: str,
    params_path: str | None,
    seed: int,
    network: str | None,
    search: bool,
    streaming: bool,
    axis: str | None,
    only_outputs: str | None,
    whole_encoder: bool,
    hoist: bool,
    whole_sequence: bool,
    fuse: bool,
    verbose: bool,
) -> None:
    """Export MODEL for inference: its torch module with parameters, batch and dynamic dims
    left dynamic, taking the inputs and `<dim>_lens`, returning the outputs (and the lengths of
    dims its loops make), no losses. The file is then run on a batch of another size and length
    and compared with the torch module."""
    from netc.cli_common import _graph, _one_line, _progress_on

    _progress_on()
    if streaming:
        if fmt == "torch-export" or search:
            raise click.UsageError("--streaming writes --format onnx or torchscript, and the decoder without --search")
        from netc.cli_stream import export_streaming

        with _one_line("export", verbose, user_errors=(KeyError, ValueError, OSError)):
            names = [n.strip() for n in only_outputs.split(",")] if only_outputs else None
            export_streaming(model, network, fmt, output, params_path, seed, axis, names, whole_encoder)
        return
    if axis or only_outputs or whole_encoder:
        raise click.UsageError("--axis, --outputs and --whole-encoder go with --streaming")
    with _one_line("export", verbose, user_errors=(KeyError, ValueError, OSError)):  # --params' or -o's mistakes
        from netc.outputs import prepare
        from netc_runtime.export import check
        from netc_runtime.export import export as run_export

        # torch.export keeps a loop only as torch's `scan` (and specialises the length a fused
        # LSTM's native op runs over: it runs as its loop); the other formats script the module
        scan = fmt == "torch-export"
        g = _graph(model, network, hoist, whole_sequence, fuse and not scan, loops="scan" if scan else "python")
        prepare(output)  # before the export: a path that cannot be written fails at once
        sig = run_export(g, fmt, output, params_path, seed, search)
        try:
            checked = check(g, fmt, output, params_path, seed, search)
        except Exception:
            Path(output).unlink(missing_ok=True)  # a file that does not compute what the model does
            raise

    sizes = {d.name: d.size for d in g.dims}

    def show(items):
        return ", ".join(f"{n}[{', '.join(d if sizes[d] is None else str(sizes[d]) for d in ds)}]" for n, ds in items)

    inputs = [(n, ds) for n, ds in sig.inputs if n not in sig.left_out]
    outputs = [(sig.renamed.get(n, n), ds) for n, ds in sig.outputs]
    click.echo(f"wrote {output} ({fmt}): ({show(inputs)}) -> ({show(outputs)})")
    for name, there in sig.renamed.items():
        click.echo(f"note: the result `{name}` is `{there}` in the file (an input has its name)")
    if sig.left_out:
        left = ", ".join(f"`{n}`" for n in sig.left_out)
        verb = "is not an input" if len(sig.left_out) == 1 else "are not inputs"
        click.echo(f"note: {left} {verb} of the file (nothing it computes reads them)")
    lens = ", ".join(f"{d}={v}" for d, v in checked.lens.items())
    click.echo(f"checked: batch 4{', lengths ' + lens if lens else ''}: max|Δ| = {checked.max_abs_diff:.3e} vs torch")

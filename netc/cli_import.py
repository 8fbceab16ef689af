"""`netc import`: a RETURNN (TensorFlow net-dict) config as a netc model (docs/import.md)."""

from __future__ import annotations

import os
import sys

import click

from netc.cli_common import _fail, _write
from netc.errors import CompileError


@click.command("import")
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="The model file to write [default: stdout].")
@click.option("--network", "network_var", default="network", show_default=True, help="The config's net dict.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="As RETURNN's `++NAME VALUE` (repeatable).")
@click.option(
    "--param-map",
    type=click.Path(dir_okay=False),
    help="Write the name map as JSON: each original TF variable -> the model's parameter (module path, RETURNN name).",
)
@click.option(
    "--no-exec",
    is_flag=True,
    help="Do not run the config: evaluate its `network`, `extern_data`/`num_outputs` and dim tags from its "
    "syntax (literals, arithmetic, formatting, comprehensions, if/for, config.value(...) from --set, Dim, "
    "FeatureDim, SpatialDim); other code they need is a located error, code they do not need is skipped.",
)
@click.option(
    "--checkpoint",
    metavar="PREFIX",
    help="The original's TF checkpoint (e.g. net-model/network.040): write its values as the model's parameters "
    "(--params-out, --state-dict-out).",
)
@click.option(
    "--params-out",
    type=click.Path(dir_okay=False),
    help="With --checkpoint: npz of param:<RETURNN name> (netc run/export --params) [default: -o's name, .npz].",
)
@click.option(
    "--state-dict-out",
    type=click.Path(dir_okay=False),
    help="With --checkpoint: the torch module's state_dict (torch.save) [default: -o's name, .pt].",
)
def import_(
    config: str,
    output: str | None,
    network_var: str,
    sets: tuple[str, ...],
    param_map: str | None,
    no_exec: bool,
    checkpoint: str | None,
    params_out: str | None,
    state_dict_out: str | None,
) -> None:
    """A RETURNN (TensorFlow net-dict) config as a netc model (docs/import.md). RETURNN loads the
    config in a subprocess (with --no-exec, netc evaluates it without running it); unsupported
    layers are located errors (exit 1) and listed in the written model's header."""
    import json

    from netc.importer import import_config

    pairs = []
    for s in sets:
        if "=" not in s:
            raise click.UsageError(f"--set takes NAME=VALUE, not {s!r}")
        pairs.append(tuple(s.split("=", 1)))
    if checkpoint is None and (params_out or state_dict_out):
        raise click.UsageError("--params-out and --state-dict-out go with --checkpoint")
    if checkpoint is not None and (output is None or output == "-") and not (params_out and state_dict_out):
        raise click.UsageError("--checkpoint without -o FILE needs --params-out and --state-dict-out")
    try:
        result = import_config(config, pairs, network_var, no_exec=True if no_exec else None)
        if checkpoint is not None and not result.errors:
            from netc.importer.checkpoint import carry, read_checkpoint, write_params

            values = carry(read_checkpoint(checkpoint), result.params, checkpoint)
    except CompileError as e:
        _fail(e)
    _write(output, result.source)
    if checkpoint is not None and not result.errors:
        stem = os.path.splitext(output)[0] if output and output != "-" else ""
        npz, pt = params_out or stem + ".npz", state_dict_out or stem + ".pt"
        try:
            write_params(values, result.params, npz, pt)
        except OSError as e:
            click.echo(f"error: cannot write the parameters: {e}", err=True)
            sys.exit(1)
        click.echo(f"{checkpoint}: {len(values)} variables -> {npz} (netc run --params), {pt} (state_dict)", err=True)
    if param_map:
        mapping = {"params": result.params, "outputs": result.outputs, "losses": result.losses}
        _write(param_map, json.dumps(mapping, indent=1) + "\n")
    for note in result.notes:
        click.echo(f"{config}: note: {note}", err=True)
    for w in result.warnings:
        click.echo(w.render().replace(": error: ", ": warning: ", 1), err=True)
    for e in result.errors:
        click.echo(e.render(), err=True)
    if result.errors:
        if checkpoint is not None:
            click.echo(f"{checkpoint}: error: not carried to a model with layers left out", err=True)
        sys.exit(1)

"""`netc module-params`: which RETURNN variables of another network's checkpoint a module of this
one loads (RETURNN's `preload_from_files` `var_name_mapping`)."""

from __future__ import annotations

import sys

import click

from netc.cli_common import _graph


@click.command("module-params")
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--network", help="The @network function, when the file has several.")
@click.option("--module", "path", required=True, help="The module's path (its torch name: `lm`, `lm.rec`).")
@click.option(
    "--from",
    "source",
    type=click.Path(exists=True, dir_okay=False),
    help="The model the checkpoint is of (default: MODEL).",
)
@click.option("--from-network", help="Its @network function.")
@click.option("--from-module", help="The module's path there (default: --module).")
def module_params(
    model: str, network: str | None, path: str, source: str | None, from_network: str | None, from_module: str | None
) -> None:
    """Print, as a Python dict, each RETURNN variable of MODULE in MODEL -> its name in the other
    network's checkpoint: the `var_name_mapping` of a `preload_from_files` entry."""
    from netc_runtime.checkpoint import CheckpointError, module_param_mapping

    to = _graph(model, network)
    src = _graph(source or model, from_network)
    try:
        mapping = module_param_mapping(to, path, src, from_module)
    except CheckpointError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    click.echo("{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in mapping.items()) + "}")

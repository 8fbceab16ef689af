"""The `netc` command: a thin layer over library functions.

User mistakes in model files print as `file:line:col: error: ...` with the source line and
a caret, exit code 1. Anything else that goes wrong is a netc bug and shows its traceback.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from netc.errors import CompileError

_TARGETS = ("returnn", "torch")


def _fail(e: CompileError) -> None:
    click.echo(e.render(), err=True)
    sys.exit(1)


def _graph(model: str, network: str | None):
    from netc.compiler import compile_graph

    try:
        return compile_graph(model, network=network)
    except CompileError as e:
        _fail(e)


@click.group()
@click.version_option(package_name="netc")
def main() -> None:
    """netc: compile plain-Python network loops to RETURNN configs and PyTorch modules."""


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--target", type=click.Choice(_TARGETS), default="returnn", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write here instead of stdout.")
@click.option("--network", help="The @network function, when the file has several.")
@click.option(
    "--base-config",
    type=click.Path(exists=True, dir_okay=False),
    help="RETURNN target: a config whose settings are merged into the emitted one.",
)
def compile(model: str, target: str, output: str | None, network: str | None, base_config: str | None) -> None:
    """Compile MODEL to a RETURNN config or a PyTorch module."""
    from netc.compiler import TARGETS

    g = _graph(model, network)
    try:
        text = TARGETS[target](g)  # a target may not support a construct: a located error too
    except CompileError as e:
        _fail(e)
    if base_config:
        if target != "returnn":
            raise click.UsageError("--base-config applies to --target returnn")
        from netc.emit_tf.merge import merge_base_config

        try:
            base = Path(base_config).read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise click.BadParameter(f"{base_config} is not UTF-8 ({e.reason} at byte {e.start})") from None
        text = merge_base_config(text, base, base_config)
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--network", help="The @network function, when the file has several.")
@click.option("--json", "as_json", is_flag=True, help="The IR as JSON (for editors and debugging).")
def explain(model: str, network: str | None, as_json: bool) -> None:
    """Print the optimised IR of MODEL: dims, parameters, loops with their state."""
    from netc.ir.printer import print_graph

    g = _graph(model, network)
    click.echo(g.model_dump_json(indent=1) if as_json else print_graph(g), nl=as_json)


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--returnn", "returnn_file", type=click.Path(dir_okay=False), help="Emitted RETURNN config to check.")
@click.option("--torch", "torch_file", type=click.Path(dir_okay=False), help="Emitted torch module to check.")
@click.option("--network", help="The @network function, when the file has several.")
def check(model: str, returnn_file: str | None, torch_file: str | None, network: str | None) -> None:
    """Check that MODEL compiles and that emitted files are current (for CI)."""
    from netc.compiler import TARGETS

    g = _graph(model, network)
    stale = []
    for target, path in (("returnn", returnn_file), ("torch", torch_file)):
        try:  # every target, even without a file to compare: a target may reject a construct
            text = TARGETS[target](g)
        except CompileError as e:
            _fail(e)
        if path is not None and (not os.path.exists(path) or Path(path).read_bytes() != text.encode("utf-8")):
            stale.append((target, path))
    for target, path in stale:
        net = f" --network {network}" if network else ""
        click.echo(f"{path}: stale; regenerate with `netc compile {model} --target {target}{net} -o {path}`", err=True)
    if stale:
        sys.exit(1)
    click.echo(f"{model}: ok")


def _quiet_tf() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--backend", type=click.Choice(("eager", "torch", "returnn")), required=True)
@click.option(
    "--inputs",
    "inputs_path",
    type=click.Path(exists=True, dir_okay=False),
    required=True,
    help="npz with in:<input>, len:<dim> (and optionally param:<name>).",
)
@click.option(
    "--params",
    "params_path",
    type=click.Path(exists=True, dir_okay=False),
    help="npz with param:<RETURNN variable name>; others are drawn randomly.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), required=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for parameters not given.")
@click.option("--network", help="The @network function, when the file has several.")
def run(
    model: str, backend: str, inputs_path: str, params_path: str | None, output: str, seed: int, network: str | None
) -> None:
    """Run MODEL on one batch with one backend; write outputs to an npz."""
    _quiet_tf()
    from netc_runtime.npz import run_npz

    g = _graph(model, network)
    try:
        run_npz(model, g, backend, inputs_path, params_path, output, seed)
    except CompileError as e:
        _fail(e)
    except (KeyError, ValueError) as e:
        click.echo(f"error: {e.args[0] if e.args else e}", err=True)
        sys.exit(1)


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--batch", type=int, default=3, show_default=True)
@click.option("--max-len", type=int, default=7, show_default=True)
@click.option("--network", help="The @network function, when the file has several.")
def verify(model: str, seed: int, batch: int, max_len: int, network: str | None) -> None:
    """Run eager, torch and RETURNN on one padded batch; compare every valid frame."""
    _quiet_tf()
    from netc_runtime.verify import TOLERANCE
    from netc_runtime.verify import verify as run_verify

    g = _graph(model, network)
    try:
        comps, lens = run_verify(model, g, seed=seed, batch=batch, max_len=max_len)
    except CompileError as e:
        _fail(e)
    click.echo(f"{model}: batch {batch}, lengths " + ", ".join(f"{d}={list(map(int, v))}" for d, v in lens.items()))
    ok = True
    for c in comps:
        good = c.max_abs_diff <= TOLERANCE
        ok &= good
        click.echo(
            f"  {c.output:<16} eager vs {c.backend:<8} max|Δ| = {c.max_abs_diff:.3e}  "
            f"({c.valid_frames} valid values)  {'ok' if good else 'FAIL'}"
        )
    if not ok:
        click.echo(f"verify failed: difference above {TOLERANCE}", err=True)
        sys.exit(1)
    click.echo("verify: ok")


if __name__ == "__main__":
    main()

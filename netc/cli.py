"""The `netc` command: a thin layer over library functions.

User mistakes in model files print as `file:line:col: error: ...` with the source line and
a caret, exit code 1. Commands that run models (`verify`, `run`, `export`, `check --construct`) report a
failing backend or framework in one line (`--verbose`: with the traceback). Anything else that
goes wrong elsewhere is a netc bug and shows its traceback.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from netc import tf_quiet
from netc.cli_common import (
    _TARGETS,
    _fail,
    _graph,
    _loops_option,
    _one_line,
    _pass_options,
    _progress_on,
    _project_options,
    _verbose,
    _write,
)
from netc.cli_export import export  # its own file: this one is long
from netc.cli_import import import_
from netc.cli_params import module_params
from netc.errors import CompileError
from netc.outputs import OutputError, prepare, write_text


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="netc")
def main() -> None:
    """netc: compile plain-Python network loops to RETURNN configs and PyTorch modules."""
    tf_quiet.quiet()  # any command may import TensorFlow, or start a process that does


@main.command()
@click.argument("model", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--target", type=click.Choice(_TARGETS), help="[default: returnn]")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write here (its folder is made if missing); stdout if absent or -.",
)
@click.option("--network", help="The @network function, when the file has several.")
@click.option(
    "--base-config",
    type=click.Path(exists=True, dir_okay=False),
    help="RETURNN targets: a config whose settings are merged into the emitted one.",
)
@click.option("--all", "all_models", is_flag=True, help="Every model declared in pyproject.toml's [tool.netc].")
@click.option(
    "--inference",
    is_flag=True,
    help="--target torch: the module for inference: no losses, a decoder searches (same parameters).",
)
@_pass_options
@_loops_option
@_project_options
def compile(
    model: str | None,
    target: str | None,
    output: str | None,
    network: str | None,
    base_config: str | None,
    all_models: bool,
    inference: bool,
    hoist: bool,
    whole_sequence: bool,
    fuse: bool,
    loops: str,
    jobs: int | None,
    no_cache: bool,
) -> None:
    """Compile MODEL to a RETURNN config or a PyTorch module, or (--all) every declared model."""
    if all_models:
        if (
            model
            or target
            or output
            or network
            or base_config
            or not (hoist and whole_sequence and fuse)
            or loops != "python"
            or inference
        ):
            raise click.UsageError("--all compiles what pyproject.toml declares: give no MODEL or per-model options")
        _compile_project(jobs, no_cache)
        return
    if model is None:
        raise click.UsageError("give a MODEL, or --all for every model declared in pyproject.toml")
    from netc.compiler import CONFIG_TARGETS, TARGETS

    target = target or "returnn"
    if inference and target != "torch":
        raise click.UsageError("--inference applies to --target torch")
    g = _graph(model, network, hoist, whole_sequence, fuse, loops=loops)
    try:
        if inference:
            from netc.emit_torch.module import emit_torch
            from netc.passes.inference import inference_graph

            text = emit_torch(inference_graph(g, keep_params=True), inference=True)
        else:
            text = TARGETS[target](g)  # a target may not support a construct: a located error too
    except CompileError as e:
        _fail(e)
    if base_config:
        if target not in CONFIG_TARGETS:
            raise click.UsageError("--base-config applies to --target returnn and returnn-torch")
        from netc.emit_tf.merge import merge_base_config
        from netc.parser.source import read_text

        try:
            base = read_text(base_config)  # a Python file: decoded as Python decodes it
        except CompileError as e:
            _fail(e)
        text = merge_base_config(text, base, base_config)
    _write(output, text)


def _load_project():
    """The project around the current directory; a configuration mistake exits with code 2."""
    from netc.project import ConfigError, find_pyproject, load_project

    try:
        return load_project(find_pyproject(Path.cwd()))
    except ConfigError as e:
        click.echo(e.render(), err=True)
        sys.exit(2)


def _compile_project(jobs: int | None, no_cache: bool) -> None:
    from netc.build import compile_all

    project = _load_project()
    results = compile_all(project.models, None if no_cache else project.cache_dir, jobs or os.cpu_count() or 1)
    wrote = unchanged = not_written = 0
    for c in results:
        if c.error is not None:
            click.echo(c.error.render(), err=True)
            continue
        for target, path in c.job.outputs.items():
            out = Path(path)
            if out.is_file() and out.read_bytes() == c.texts[target].encode("utf-8"):
                unchanged += 1  # not rewritten: its time stamp stays, so build tools see no change
                continue
            try:
                write_text(out, c.texts[target])
            except OutputError as e:
                click.echo(f"error: {e}", err=True)
                not_written += 1
                continue
            click.echo(f"wrote {path}")
            wrote += 1
    failed = sum(c.error is not None for c in results)
    files = sum(len(c.job.outputs) for c in results if c.error is None)
    click.echo(
        f"netc compile --all: {_count(len(results), 'model')}{f' ({failed} with errors)' if failed else ''}, "
        f"{_count(files, 'file')}: {wrote} written, {unchanged} unchanged"
        + (f", {not_written} not written" if not_written else "")
    )
    if failed or not_written:
        sys.exit(1)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--network", help="The @network function, when the file has several.")
@click.option("--json", "as_json", is_flag=True, help="The IR as JSON (for editors and debugging).")
def explain(model: str, network: str | None, as_json: bool) -> None:
    """Print the optimised IR of MODEL: dims, parameters, loops with their state."""
    from netc.ir.json import graph_to_json
    from netc.ir.printer import print_graph

    g = _graph(model, network, as_json=as_json)
    click.echo(graph_to_json(g, indent=1) if as_json else print_graph(g), nl=as_json)


@main.command()
@click.argument("model", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--returnn", "returnn_file", type=click.Path(dir_okay=False), help="Emitted RETURNN config to check.")
@click.option("--torch", "torch_file", type=click.Path(dir_okay=False), help="Emitted torch module to check.")
@click.option(
    "--returnn-torch",
    "returnn_torch_file",
    type=click.Path(dir_okay=False),
    help="Emitted RETURNN config for the PyTorch backend to check.",
)
@click.option("--network", help="The @network function, when the file has several.")
@click.option(
    "--construct",
    is_flag=True,
    help="Also construct each RETURNN network in RETURNN and run each torch module on a small padded batch.",
)
@click.option("--format", "fmt", type=click.Choice(("text", "json", "github")), default="text", show_default=True)
@_project_options
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Text format: a --construct failure with its traceback (json and github have it).",
)
def check(
    model: str | None,
    returnn_file: str | None,
    torch_file: str | None,
    returnn_torch_file: str | None,
    network: str | None,
    construct: bool,
    fmt: str,
    jobs: int | None,
    no_cache: bool,
    verbose: bool,
) -> None:
    """Check that models compile and that generated files are current (for CI).

    With no MODEL: every model declared in the nearest pyproject.toml's [tool.netc]. Exit code
    0: all good; 1: something stale, missing or invalid; 2: a usage or configuration error.
    """
    from netc.build import Cache, compile_all
    from netc.check import check_outputs, construct_all
    from netc.check_report import RENDERERS, render_text, summary_line
    from netc.project import ConfigError, ModelJob

    if model is None:
        if returnn_file or torch_file or returnn_torch_file or network:
            raise click.UsageError(
                "--returnn, --torch, --returnn-torch and --network go with a MODEL; without one, see pyproject.toml"
            )
        project = _load_project()
        models, cache_dir = project.models, None if no_cache else project.cache_dir

        def regen(job, target, path):
            return "netc compile --all"
    else:
        # one model given on the command line: every target is compiled, even without a file to compare
        files = {"returnn": returnn_file, "torch": torch_file, "returnn-torch": returnn_torch_file}
        models = [ModelJob(model, network, files)]
        cache_dir = None

        def regen(job, target, path):
            net = f" --network {job.network}" if job.network else ""
            return f"netc compile {job.source} --target {target}{net} -o {path}"

    compiled = compile_all(models, cache_dir, jobs or os.cpu_count() or 1)
    checks = [check_outputs(c, regen) for c in compiled]
    if construct:
        _progress_on()
        try:
            construct_all(checks, compiled, Cache(cache_dir))
        except ConfigError as e:
            click.echo(e.render(), err=True)
            sys.exit(2)
    if fmt == "text":  # model by model, so that a model's diff follows its line (stdout and stderr interleave)
        for mc in checks:
            out, err = render_text([mc], with_summary=False, verbose=verbose)
            click.echo(out, nl=False)
            click.echo(err, nl=False, err=True)
        click.echo(summary_line(checks))
    else:
        out, err = RENDERERS[fmt](checks)
        click.echo(out, nl=False)
        click.echo(err, nl=False, err=True)
    sys.exit(0 if all(mc.status == "ok" for mc in checks) else 1)


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write here (its folder is made if missing); stdout if absent or -.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("html", "dot", "json")),
    default="html",
    show_default=True,
    help="html: a self-contained page; dot: Graphviz input; json: the graph as data (docs/preview-schema.json).",
)
@click.option(
    "--view", type=click.Choice(("returnn", "torch")), default="returnn", show_default=True, help="For --format dot."
)
@click.option("--watch", is_flag=True, help="Serve the page on 127.0.0.1 and re-render it when MODEL changes.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="For --watch; 0: any free port."
)
@click.option("--network", help="The @network function, when the file has several.")
def preview(model: str, output: str | None, fmt: str, view: str, watch: bool, port: int, network: str | None) -> None:
    """Draw the emitted graph of MODEL: loops, state, hoisted ops, and for each node its
    source line, RETURNN layer and torch line. Needs Graphviz (`dot`) for the HTML page."""
    from netc.preview import live_page, render_preview
    from netc.preview.page import GraphvizMissing
    from netc.preview.server import PortInUse

    if watch and (output or fmt != "html"):
        raise click.UsageError("--watch serves the HTML page; it takes no -o or --format")
    try:
        if watch:
            from netc.preview.page import render_error_page
            from netc.preview.server import serve

            serve(
                Path(model),
                lambda version: live_page(model, network, version),
                port,
                lambda message: click.echo(f"netc preview: {message}"),
                lambda version: render_error_page(model, f"{model}: the file was deleted", version),
            )
            return
        text = render_preview(model, network, fmt, view)
    except CompileError as e:
        _fail(e, as_json=fmt == "json")
    except GraphvizMissing as e:
        click.echo(f"error: {e.message}", err=True)
        sys.exit(2)
    except PortInUse as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except OSError as e:
        click.echo(f"error: {e.strerror or e}", err=True)
        sys.exit(2)
    _write(output, text)


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--backend", type=click.Choice(("eager", "torch", "returnn")))
@click.option(
    "--inputs",
    "inputs_path",
    type=click.Path(exists=True, dir_okay=False),
    help="npz with in:<input>, len:<dim> (and optionally param:<name>).",
)
@click.option(
    "--template",
    is_flag=True,
    help="Write a valid --inputs npz for MODEL to -o instead (random values, unequal lengths; --seed).",
)
@click.option("--batch", type=click.IntRange(min=1), default=3, show_default=True, help="For --template.")
@click.option("--max-len", type=click.IntRange(min=1), default=7, show_default=True, help="For --template.")
@click.option(
    "--params",
    "params_path",
    type=click.Path(exists=True, dir_okay=False),
    help="npz with param:<RETURNN variable name>; others are drawn randomly.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    required=True,
    help="The npz to write (its folder is made); - for stdout.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for parameters not given.")
@click.option("--network", help="The @network function, when the file has several.")
@click.option("--search", is_flag=True, help="Decode with the beam (a model with `choice`); targets are not needed.")
@_verbose
def run(
    model: str,
    backend: str | None,
    inputs_path: str | None,
    template: bool,
    batch: int,
    max_len: int,
    params_path: str | None,
    output: str,
    seed: int,
    network: str | None,
    search: bool,
    verbose: bool,
) -> None:
    """Run MODEL on one batch with one backend; write outputs to an npz."""
    if template:
        if backend or inputs_path or params_path or search:
            raise click.UsageError("--template writes an input file: give no --backend, --inputs, --params or --search")
    elif not (backend and inputs_path):
        raise click.UsageError("give --backend and --inputs (or --template to write an input file)")
    _progress_on()
    with _one_line("run", verbose, user_errors=(KeyError, ValueError, OSError)):  # the npz files' mistakes
        from netc_runtime.npz import run_npz, write_template

        g = _graph(model, network)
        if output != "-":
            prepare(output)  # before the run: a path that cannot be written fails at once
        if template:
            write_template(g, output, seed, batch, max_len)
        else:
            run_npz(model, g, backend, inputs_path, params_path, output, seed, search=search)


@main.command()
def lsp() -> None:
    """A language server over stdio, for editors: diagnostics as you type, hover (dims, state,
    RETURNN layer, torch line), go to definition, "Show in the netc preview" (docs/editor.md)."""
    try:
        from netc.lsp.server import main as serve
    except ImportError as e:
        click.echo(f"error: `netc lsp` needs pygls ({e.name} is missing): pip install 'netc[lsp]'", err=True)
        sys.exit(2)
    serve()


@main.command("convert-checkpoint")
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.argument("checkpoint")
@click.option("-o", "--output", required=True, help="The converted checkpoint: a TF prefix, or a .pt file.")
@click.option("--network", help="The @network function, when the file has several.")
def convert_checkpoint(model: str, checkpoint: str, output: str, network: str | None) -> None:
    """Convert a checkpoint of MODEL between RETURNN's engines.

    CHECKPOINT a PyTorch checkpoint (`.pt`: RETURNN's PyTorch backend, or a module's state_dict):
    OUTPUT is a TensorFlow checkpoint prefix (e.g. net-model/network.005). CHECKPOINT a TensorFlow
    checkpoint prefix: OUTPUT is a .pt file in RETURNN's PyTorch format.
    """
    _progress_on()
    from netc_runtime.checkpoint import CheckpointError
    from netc_runtime.checkpoint import convert_checkpoint as convert

    g = _graph(model, network)
    try:
        click.echo(convert(g, checkpoint, output))
    except (CheckpointError, OutputError) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--batch", type=click.IntRange(min=1), default=3, show_default=True)
@click.option(
    "--max-len",
    type=click.IntRange(min=1),
    default=7,
    show_default=True,
    help="The longest sequence of each dynamic input dim.",
)
@click.option("--network", help="The @network function, when the file has several.")
@click.option("--search", is_flag=True, help="Compare beam searches: best labels, their lengths and scores.")
@click.option(
    "--params",
    "params_path",
    type=click.Path(exists=True, dir_okay=False),
    help="npz with param:<RETURNN variable name> (e.g. `netc import --checkpoint`'s); others are drawn randomly.",
)
@click.option(
    "--no-returnn",
    is_flag=True,
    help="Compare eager and torch only (a network RETURNN refuses, e.g. one with `transducer_search`).",
)
@click.option(
    "--same-as",
    "same_as",
    metavar="NETWORK",
    help="Also run NETWORK of the same file on the same batch and parameters (by module path) on each "
    "backend and compare the outputs both return (<= 1e-5): e.g. a chunk-by-chunk network against its "
    "whole-sequence form.",
)
@_pass_options
@_loops_option
@_verbose
def verify(
    model: str,
    seed: int,
    batch: int,
    max_len: int,
    network: str | None,
    search: bool,
    params_path: str | None,
    no_returnn: bool,
    same_as: str | None,
    hoist: bool,
    whole_sequence: bool,
    fuse: bool,
    loops: str,
    verbose: bool,
) -> None:
    """Run eager, torch and RETURNN on one padded batch; compare every valid frame."""
    _progress_on()
    with _one_line("verify", verbose, user_errors=(ValueError,)):  # e.g. --search without `choice`, --params
        from netc_runtime.npz import read_params
        from netc_runtime.verify import TOLERANCE, eager_cannot_run
        from netc_runtime.verify import verify as run_verify

        g = _graph(model, network, hoist, whole_sequence, fuse, loops=loops)
        params = read_params(g, params_path) if params_path else None
        backends = ("eager", "torch") if no_returnn else ("eager", "torch", "returnn")
        comps, lens = run_verify(
            model, g, backends, seed=seed, batch=batch, max_len=max_len, search=search, params=params
        )
    click.echo(f"{model}: batch {batch}, lengths " + ", ".join(f"{d}={list(map(int, v))}" for d, v in lens.items()))
    if comps and comps[0].reference != "eager":
        click.echo(
            f"  (eager mode runs one sequence at a time and cannot run this model: {eager_cannot_run(g, model)})"
        )
    ok = True
    for c in comps:
        ok &= c.ok
        relative = f", relative to |loss| = {c.scale:.4g}" if c.scale != 1.0 else ""
        click.echo(
            f"  {c.output:<16} {c.reference} vs {c.backend:<8} max|Δ| = {c.max_abs_diff:.3e}  "
            f"({c.valid_frames} valid values{relative})  {'ok' if c.ok else 'FAIL'}"
        )
    if not ok:
        click.echo(f"verify failed: difference above {TOLERANCE} (a loss's: relative to its size)", err=True)
        sys.exit(1)
    if same_as is not None:  # each target agrees with eager: now the other network with this one
        _verify_same(
            model, network, same_as, seed, batch, max_len, no_returnn, hoist, whole_sequence, fuse, loops, verbose
        )
    click.echo("verify: ok")


def _verify_same(
    model: str,
    network: str | None,
    other: str,
    seed: int,
    batch: int,
    max_len: int,
    no_returnn: bool,
    hoist: bool,
    whole_sequence: bool,
    fuse: bool,
    loops: str,
    verbose: bool,
) -> None:
    """`verify --same-as`: the two networks agree on every backend (after each verified itself)."""
    with _one_line("verify", verbose, user_errors=(ValueError,)):
        from netc_runtime.verify_same import SAME_TOLERANCE, verify_same

        a = _graph(model, network, hoist, whole_sequence, fuse, loops=loops)
        b = _graph(model, other, hoist, whole_sequence, fuse, loops=loops)
        if a.network == b.network:
            raise ValueError(f"--same-as names the network verified ({a.network}); name the other one")
        backends = ("eager", "torch") if no_returnn else ("eager", "torch", "returnn")
        comps, lens = verify_same(model, a, b, backends, seed=seed, batch=batch, max_len=max_len)
    click.echo(
        f"{model}: {a.network} vs {b.network}, batch {batch}, lengths "
        + ", ".join(f"{d}={list(map(int, v))}" for d, v in lens.items())
    )
    bad = [c for c in comps if not c.ok]
    for c in comps:
        relative = f", relative to |loss| = {c.scale:.4g}" if c.scale != 1.0 else ""
        click.echo(
            f"  {c.output:<16} on {c.backend:<8} max|Δ| = {c.max_abs_diff:.3e}  "
            f"({c.valid_values} valid values{relative})  {'ok' if c.ok else 'FAIL'}"
        )
    if bad:
        worst = max(bad, key=lambda c: c.max_abs_diff / c.scale)
        click.echo(
            f"verify failed: {b.network} differs from {a.network}: {worst.output} on {worst.backend}, "
            f"max|Δ| = {worst.max_abs_diff:.3e} > {SAME_TOLERANCE * worst.scale:.1e}",
            err=True,
        )
        sys.exit(1)
    click.echo(f"{b.network} = {a.network} on {', '.join(backends)}")


main.add_command(export)
main.add_command(import_)
main.add_command(module_params)

if __name__ == "__main__":
    main()

"""Regenerate the golden emitted files: `.venv/bin/python tests/regen_golden.py`.

Review the diff before committing: every change in emitted code should be intended.
"""

from __future__ import annotations

from pathlib import Path

from conftest import network_names

from netc.compiler import TARGETS, compile_graph
from netc.errors import CompileError
from netc.ir.model import Graph

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"


def golden_path(model: Path, target: str, network: str | None = None) -> Path:
    """`<example>.<target>.py.golden` for an example's (first) network, and with the network's
    name before the target for the others of a file that has several."""
    other = network is not None and network != network_names(model)[0]
    return GOLDEN / f"{model.stem}.{network + '.' if other else ''}{target}.py.golden"


def example_networks() -> list[tuple[Path, str | None]]:
    """Every network of every example: (file, None) for a file's only one."""
    out: list[tuple[Path, str | None]] = []
    for model in sorted((ROOT / "examples").glob("*.py")):
        names = network_names(model)
        out += [(model, name if len(names) > 1 else None) for name in names]
    return out


def emitted(target: str, g: Graph) -> str:
    """The target's code for the network, or the located error where the target refuses it
    (RETURNN's for `transducer_search`): a refusal is pinned as code is."""
    try:
        return TARGETS[target](g)
    except CompileError as e:
        return f"netc refuses this network for {target}:\n{e.render()}\n"


def main() -> None:
    GOLDEN.mkdir(exist_ok=True)
    for model, network in example_networks():
        g = compile_graph(str(model.relative_to(ROOT)), network=network)
        for target in TARGETS:
            golden_path(model, target, network).write_text(emitted(target, g), encoding="utf-8")
            print(golden_path(model, target, network).relative_to(ROOT))


if __name__ == "__main__":
    main()

"""Regenerate the golden emitted files: `.venv/bin/python tests/regen_golden.py`.

Review the diff before committing: every change in emitted code should be intended.
"""

from __future__ import annotations

from pathlib import Path

from conftest import network_names

from netc.compiler import TARGETS, compile_graph

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


def main() -> None:
    GOLDEN.mkdir(exist_ok=True)
    for model, network in example_networks():
        g = compile_graph(str(model.relative_to(ROOT)), network=network)
        for target, emit in TARGETS.items():
            golden_path(model, target, network).write_text(emit(g), encoding="utf-8")
            print(golden_path(model, target, network).relative_to(ROOT))


if __name__ == "__main__":
    main()

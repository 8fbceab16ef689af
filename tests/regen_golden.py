"""Regenerate the golden emitted files: `.venv/bin/python tests/regen_golden.py`.

Review the diff before committing: every change in emitted code should be intended.
"""

from __future__ import annotations

from pathlib import Path

from netc.compiler import TARGETS, compile_graph

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"


def golden_path(model: Path, target: str) -> Path:
    return GOLDEN / f"{model.stem}.{target}.py.golden"


def main() -> None:
    GOLDEN.mkdir(exist_ok=True)
    for model in sorted((ROOT / "examples").glob("*.py")):
        g = compile_graph(str(model.relative_to(ROOT)))
        for target, emit in TARGETS.items():
            golden_path(model, target).write_text(emit(g), encoding="utf-8")
            print(golden_path(model, target).relative_to(ROOT))


if __name__ == "__main__":
    main()

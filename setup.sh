#!/usr/bin/env bash
# Fresh clone → .venv/ with everything installed, then compile + verify the seed example.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch is pinned to the CPU build; a looser requirement would pull a multi-GB CUDA build
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[run,dev]"
mkdir -p out
.venv/bin/netc compile examples/elman.py --target returnn -o out/elman_config.py
.venv/bin/netc compile examples/elman.py --target torch -o out/elman_torch.py
.venv/bin/netc verify examples/elman.py

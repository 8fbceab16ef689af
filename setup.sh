#!/usr/bin/env bash
# Fresh clone → .venv/ with everything installed, then compile + verify the seed example.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
# system packages: Graphviz (`netc preview` lays graphs out with `dot`) and headless Chromium with
# its driver (the preview's browser tests), Neovim (the language server's editor test), espeak-ng (the
# spoken-digit recipe synthesises its corpus with it); installed only when missing (CI runs this as root)
missing=()
command -v dot >/dev/null || missing+=(graphviz)
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
command -v nvim >/dev/null || missing+=(neovim)  # the language server test in a real editor
command -v espeak-ng >/dev/null || missing+=(espeak-ng)  # examples/digits: the corpus's speech
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=$([ "$(id -u)" -eq 0 ] || echo sudo)
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch is pinned to the CPU build; a looser requirement would pull a multi-GB CUDA build
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[run,dev]"
mkdir -p out
.venv/bin/netc compile examples/elman.py --target returnn -o out/elman_config.py
.venv/bin/netc compile examples/elman.py --target torch -o out/elman_torch.py
.venv/bin/netc verify examples/elman.py

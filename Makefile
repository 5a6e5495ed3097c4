# Every target sets up its own .venv from pyproject.toml (re-installed when pyproject changes).
PY ?= python3
# The whole experiment (~46 min on a quiet 2-core machine): three runs of each arm, of each affinity mode and of
# each sweep point, so the report shows how far a capacity moves from run to run. The page in docs/experiments
# names the arguments of the run it shows (its headline arms alone: 26 min).
EXPERIMENT_ARGS ?= --repeats 3 --sweep-repeats 3 --shares 0,0.25,0.75,1 --start 48 --factor 1.35 --max-steps 11 \
	--windows 2 --window 3 --affinity-repeats 3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint demo demo-real bench bench-real bench-peers experiment soak venv clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The house rules as checks (configured in pyproject.toml): ruff's lint rules (never `ruff format`), the import
# layers of ARCHITECTURE.md, mypy (strict on the pure core) and the docs site (reference pages generated from the
# code; a broken link or page fails it; it writes site/, which git ignores).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

demo: $(STAMP)
	$(BIN)/python -m quantroute.demo $(DEMO_ARGS)

# A real vLLM fleet (bf16, int8, int4 of the tiny trained model; ~3.3 GB RAM per server) under router,
# controller and dashboard. The setup steps are cached (.venvs/, .cache/): only the first run takes minutes, and
# it stops with the figures if the artifacts do not show the quantization gap (scripts/check_real_gap.py).
demo-real: $(STAMP)
	bash scripts/setup_vllm.sh
	QUANTROUTE_REAL_GAP_CHECK=1 bash scripts/setup_real_tiers.sh
	QUANTROUTE_VLLM_PYTHON=$(CURDIR)/.venvs/vllm/bin/python $(BIN)/python -m quantroute.demo.real $(DEMO_ARGS)

# The fleet experiment and the soak have their own targets (they run for several minutes).
bench: $(STAMP)
	@for f in benchmarks/*.py; do case "$$f" in benchmarks/fleet_mix.py|benchmarks/real_tiers_cpu.py|benchmarks/soak.py) continue;; esac; echo "== $$f"; $(BIN)/python $$f || exit 1; done

# Per-tier tok/s and memory of real vLLM (CPU) servers; needs what demo-real needs.
bench-real: $(STAMP)
	bash scripts/setup_vllm.sh
	bash scripts/setup_real_tiers.sh
	QUANTROUTE_VLLM_PYTHON=$(CURDIR)/.venvs/vllm/bin/python $(BIN)/python benchmarks/real_tiers_cpu.py

# 10 minutes of mixed and hostile traffic with faults on a schedule (SOAK_ARGS="--seconds 120 --db URL")
soak: $(STAMP)
	$(BIN)/python benchmarks/soak.py $(SOAK_ARGS)

# Every session mode on SQLite and, when one is configured, on PostgreSQL (BENCH_POSTGRES, default the test
# suite's QUANTROUTE_TEST_POSTGRES), workers 1 and 2, next to LiteLLM and vllm-router, in one table.
BENCH_POSTGRES ?= $(QUANTROUTE_TEST_POSTGRES)
bench-peers: $(STAMP)
	$(BIN)/python benchmarks/router_overhead.py --peers --db sqlite $(if $(BENCH_POSTGRES),--db $(BENCH_POSTGRES)) $(BENCH_ARGS)

experiment: $(STAMP)
	$(BIN)/python benchmarks/fleet_mix.py $(EXPERIMENT_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info

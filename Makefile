# Every target sets up its own .venv from pyproject.toml (re-installed when pyproject changes).
PY ?= python3
# three runs of each headline arm: the report shows how far a capacity moves from run to run
EXPERIMENT_ARGS ?= --repeats 3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench bench-peers experiment venv clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

demo: $(STAMP)
	$(BIN)/python -m quantroute.demo $(DEMO_ARGS)

# The fleet experiment has its own target (it runs for several minutes).
bench: $(STAMP)
	@for f in benchmarks/*.py; do [ "$$f" = benchmarks/fleet_mix.py ] && continue; echo "== $$f"; $(BIN)/python $$f || exit 1; done

bench-peers: $(STAMP)
	$(BIN)/python benchmarks/router_overhead.py --peers

experiment: $(STAMP)
	$(BIN)/python benchmarks/fleet_mix.py $(EXPERIMENT_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info

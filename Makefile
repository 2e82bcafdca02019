# fairwin: two commands on a fresh machine.
#   make demo   a real window on a real vLLM for CPU (installs everything it needs)
#   make test   the whole suite: lint, types, unit, integration, end-to-end on real vLLM
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ENGINE_ENV := .engine.env
# Unit and integration tests run on pytest-xdist workers, one per core (WORKERS=1: serially), each test
# file on one worker (a file's tests share fixtures, windows and process names); the integration files go
# first, so that their long tests start early and the many short unit files fill the gaps. The tests
# marked `alone` need the machine to themselves (they load every core), so they run after the parallel
# part, one at a time; the end-to-end tests run last and alone too: two vLLM servers on two cores would
# measure each other. HOG=1 runs the unit and integration tests beside a busy loop holding one CPU: the
# verdicts they assert must not depend on how busy the machine is. Not the e2e tests: vLLM for CPU binds
# its engine to one core and their plans run it at nice 10, so beside a hog on that core it gets a tenth
# of it, and a window would take over an hour.
WORKERS ?= auto
PARALLEL := $(if $(filter 1,$(WORKERS)),,-n $(WORKERS) --dist loadfile)
HOG ?= 0
WITH := $(if $(filter 1,$(HOG)),bash tools/with-cpu-hog.sh,)
# pytest exits 5 when a marker selects no test: not a failure here.
PYTEST_OK := rc=$$?; [ $$rc = 5 ] || status=$$rc

.PHONY: setup engine lint test test-fast test-e2e demo clean help

help:
	@echo "make demo       run the demo window on vLLM for CPU (sets everything up first)"
	@echo "make test       lint, type-check and run every test, end-to-end included"
	@echo "make test-fast  lint, type-check, unit and the fast integration tests (no engine; under 3 minutes)"
	@echo "make setup      create $(VENV) with fairwin and its dev tools"
	@echo "make engine     install vLLM for CPU and build the tiny model (once)"

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,all]' 2>&1 | { grep -v "is ignored: it is neither" || true; }
	touch $@

setup: $(BIN)/.installed

# Installs once; prints the engine's python and model paths into $(ENGINE_ENV).
engine:
	bash engine/install.sh > $(ENGINE_ENV).tmp
	mv $(ENGINE_ENV).tmp $(ENGINE_ENV)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# One case of each lifecycle matrix runs here; the rest and the longer cases (marked slow) in make test.
test-fast: lint
	bash tools/install-test-tools.sh
	status=0; $(WITH) $(BIN)/pytest tests/integration tests/unit -m "not slow and not alone" $(PARALLEL) || status=$$?; \
	$(WITH) $(BIN)/pytest tests/integration -m "alone and not slow" || { $(PYTEST_OK); }; \
	exit $$status

# A failed engine install is reported and the e2e tests skip with that reason;
# every other test still runs. The e2e tests run after the others, even when some of those failed.
test: lint
	bash tools/install-test-tools.sh
	@if bash engine/install.sh > $(ENGINE_ENV).tmp; then mv $(ENGINE_ENV).tmp $(ENGINE_ENV); \
	else rm -f $(ENGINE_ENV).tmp $(ENGINE_ENV); echo "make: the vLLM engine could not be installed; e2e tests will skip" >&2; fi
	status=0; $(WITH) $(BIN)/pytest tests/integration tests/unit -m "not alone" $(PARALLEL) || status=$$?; \
	$(WITH) $(BIN)/pytest tests/integration -m alone || { $(PYTEST_OK); }; \
	set -a; [ -f $(ENGINE_ENV) ] && source $(ENGINE_ENV); set +a; $(BIN)/pytest tests/e2e || status=$$?; \
	exit $$status

test-e2e: setup engine
	set -a; source $(ENGINE_ENV); set +a; $(BIN)/pytest tests/e2e

# Production (a vLLM for CPU on port 18531) is brought up, taken down by the window and restored;
# it is the demo's own, so it is taken down again at the end, whatever the window did.
demo: setup engine
	set -a; source $(ENGINE_ENV); set +a; \
	$(BIN)/fairwin production up examples/vllm-cpu.toml && \
	$(BIN)/fairwin run examples/vllm-cpu.toml --mode controlled; status=$$?; \
	$(BIN)/fairwin production down examples/vllm-cpu.toml; exit $$status

clean:
	rm -rf $(VENV) $(ENGINE_ENV) windows .pytest_cache .mypy_cache .ruff_cache

# fairwin: two commands on a fresh machine.
#   make demo   a real window on a real vLLM for CPU (installs everything it needs);
#               make demo ENGINE=llamacpp: the same on llama.cpp's llama-server, built for this CPU
#   make test   the whole suite: lint, types, unit, integration, end-to-end on real vLLM and llama.cpp
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ENGINE_ENV := .engine.env
LLAMA_ENV := .engine-llamacpp.env
# The demo's engine: vllm (vLLM for CPU) or llamacpp (llama.cpp's llama-server).
ENGINE ?= vllm
# Unit and integration tests run on pytest-xdist workers, three per core (WORKERS=1: serially; the tests wait
# on simulated rounds and SSH round trips for about half their time: test_window_sim.py alone used 47 % of a
# core, test_hosts.py 54 %; on 2 cores 4 workers took 455 s where 2 took 647, and 6 took 410 s where 4 took 437
# and 451 the same hour, the cores then busy 87 % of the time instead of 80), each test
# file on one worker (a file's tests share fixtures, windows and process names), in the order tests/conftest.py
# gives (LONGEST_FIRST: the longest files first), so that the many short unit files fill the gaps. The tests
# marked `alone` need the machine to themselves (they load every core), so they run after the parallel
# part, one at a time; the end-to-end tests run last and alone too: two vLLM servers on two cores would
# measure each other. HOG=N runs the unit and integration tests beside N busy loops (HOG=1: one CPU held): the
# verdicts they assert must not depend on how busy the machine is. Not the e2e tests: vLLM for CPU binds
# its engine to one core and their plans run it at nice 10, so beside a hog on that core it gets a tenth
# of it, and a window would take over an hour.
WORKERS ?= $(shell echo $$(( 3 * $$(nproc) )))
PARALLEL := $(if $(filter 1,$(WORKERS)),,-n $(WORKERS) --dist loadfile --no-loadscope-reorder)
HOG ?= 0
WITH := $(if $(filter-out 0,$(HOG)),bash tools/with-cpu-hog.sh $(HOG),)
# pytest exits 5 when a marker selects no test: not a failure here.
PYTEST_OK := rc=$$?; [ $$rc = 5 ] || status=$$rc

.PHONY: setup engine engine-llamacpp lint bytecode test test-fast test-e2e demo demo-window clean help

help:
	@echo "make demo       run the demo window on vLLM for CPU (sets everything up first)"
	@echo "                ENGINE=llamacpp: on llama.cpp's llama-server instead (built for this CPU once)"
	@echo "make test       lint, type-check and run every test, end-to-end included"
	@echo "make test-fast  lint, type-check, unit and the fast integration tests (no engine; about 2 minutes on 2 cores)"
	@echo "make setup      create $(VENV) with fairwin and its dev tools"
	@echo "make engine     install vLLM for CPU and build the tiny model (once)"
	@echo "make engine-llamacpp  build llama-server from source and write the tiny GGUF (once)"

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,all]' 2>&1 | { grep -v "is ignored: it is neither" || true; }
	touch $@

setup: $(BIN)/.installed

# Installs once; prints the engine's python and model paths into $(ENGINE_ENV).
engine:
	bash engine/install.sh > $(ENGINE_ENV).tmp
	mv $(ENGINE_ENV).tmp $(ENGINE_ENV)

engine-llamacpp:
	bash engine/install-llamacpp.sh > $(LLAMA_ENV).tmp
	mv $(LLAMA_ENV).tmp $(LLAMA_ENV)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The unit and integration tests start about 1,300 Python processes (each sim server, each pytest worker's fork
# server, each command a test execs; the commands tests/forked.py forks import nothing more).
# Where PYTHONDONTWRITEBYTECODE is set (it is on the development machine), none of them writes the bytecode
# it compiled, so each compiled fairwin's modules again: 0.1 s of CPU a window command. Written once
# here, before any test runs; a module edited later is compiled again as Python always does. The test modules
# pytest rewrites (its assertions) are cached apart, and read even where bytecode is not written: one collection
# writes them (each pytest process collected in 4.7 to 5.2 s of CPU without them, 2.7 s with them).
bytecode: setup
	$(BIN)/python -m compileall -q -j 0 src tests
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest tests --collect-only -q -p no:cacheprovider > /dev/null

# One case of each lifecycle matrix runs here; the rest and the longer cases (marked slow) in make test.
# Every test marked alone is marked slow too (tests/conftest.py refuses one that is not), so none runs here.
test-fast: lint bytecode
	bash tools/install-test-tools.sh
	$(WITH) $(BIN)/pytest tests/integration tests/unit -m "not slow and not alone" $(PARALLEL)

# An engine that does not install fails make test, with one line naming it (tools/install-engines.sh), and its
# e2e tests fail naming it too (FAIRWIN_ENGINES_REQUIRED); every other test still runs. The e2e tests run after
# the others, even when some of those failed. At the end: how many tests skipped, and why (tests/conftest.py
# appends each session's skips to FAIRWIN_SKIPS; only a component that cannot exist here may skip).
test: lint bytecode
	bash tools/install-test-tools.sh
	status=0; bash tools/install-engines.sh || status=$$?; \
	export FAIRWIN_SKIPS=$$(mktemp) FAIRWIN_ENGINES_REQUIRED=1; \
	$(WITH) $(BIN)/pytest tests/integration tests/unit -m "not alone" $(PARALLEL) || status=$$?; \
	$(WITH) $(BIN)/pytest tests/integration -m alone || { $(PYTEST_OK); }; \
	set -a; [ -f $(ENGINE_ENV) ] && source $(ENGINE_ENV); [ -f $(LLAMA_ENV) ] && source $(LLAMA_ENV); set +a; \
	$(BIN)/pytest tests/e2e || status=$$?; \
	echo "make test: $$(wc -l < $$FAIRWIN_SKIPS) test(s) skipped$$( [ -s $$FAIRWIN_SKIPS ] && echo ':')"; \
	sed 's/^/  /' $$FAIRWIN_SKIPS; rm -f $$FAIRWIN_SKIPS; \
	exit $$status

test-e2e: setup bytecode engine engine-llamacpp
	set -a; source $(ENGINE_ENV); source $(LLAMA_ENV); set +a; $(BIN)/pytest tests/e2e

# Production (a vLLM for CPU on port 18531; llama-server on 18541 with ENGINE=llamacpp) is brought up,
# taken down by the window and restored; it is the demo's own, so it is taken down again at the end,
# whatever the window did.
DEMO_PLAN := $(if $(filter llamacpp,$(ENGINE)),examples/llamacpp-cpu.toml,examples/vllm-cpu.toml)
DEMO_ENGINE := $(if $(filter llamacpp,$(ENGINE)),engine-llamacpp,engine)
DEMO_ENV := $(if $(filter llamacpp,$(ENGINE)),$(LLAMA_ENV),$(ENGINE_ENV))
demo: setup
	@case "$(ENGINE)" in vllm|llamacpp) ;; *) echo "make: ENGINE must be vllm or llamacpp, not $(ENGINE)" >&2; exit 2;; esac
	$(MAKE) --no-print-directory $(DEMO_ENGINE)
	$(MAKE) --no-print-directory demo-window DEMO_PLAN=$(DEMO_PLAN) DEMO_ENV=$(DEMO_ENV)

# The demo's window once its engine is there: production up, the window, production down whatever the window did
# (a refused or failed window included: tests/integration/test_production.py runs this target with a failing one).
demo-window: setup
	set -a; source $(DEMO_ENV); set +a; status=0; \
	$(BIN)/fairwin production up $(DEMO_PLAN) && $(BIN)/fairwin run $(DEMO_PLAN) --mode controlled || status=$$?; \
	$(BIN)/fairwin production down $(DEMO_PLAN) || status=$$(( status ? status : 1 )); exit $$status

clean:
	rm -rf $(VENV) $(ENGINE_ENV) $(LLAMA_ENV) windows .pytest_cache .mypy_cache .ruff_cache

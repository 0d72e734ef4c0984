# One entry point for humans and CI. Every target is one line; `make help` lists them.
SHELL := /bin/bash
UV := scripts/uv
PACKAGES := $(wildcard packages/*) e2e
# Go builds the cluster binaries and Helm; Go's own installer leaves it outside PATH.
export PATH := $(PATH):/usr/local/go/bin

.PHONY: help install prepare lint typecheck pytest test demo validate-demo bench proto gpu-check

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

install: ## install the workspace (all packages, dev tools) into .venv from uv.lock
	@$(UV) sync --all-packages --frozen --quiet

prepare: install ## apt-get install the Debian packages the suites miss; check root, Linux, Go, tools
	@$(UV) run --frozen e2e-cluster preflight --install --for test

lint: install ## ruff lint and format check; the architecture: import contracts, no import cycles, modules <= 600 lines
	$(UV) run --frozen ruff check . && $(UV) run --frozen ruff format --check .
	$(UV) run --frozen lint-imports
	$(UV) run --frozen python scripts/import_cycles.py
	$(UV) run --frozen python scripts/module_size.py

typecheck: install ## mypy --strict over every package's sources and tests
	@set -e; for p in $(PACKAGES); do echo "mypy $$p"; MYPYPATH=packages/kubelet-core/tests:packages/api-types/tests $(UV) run --frozen mypy $$p/src $$p/tests; done
	$(UV) run --frozen mypy bench images deployments/demo_walkthrough.py scripts/demo.py scripts/import_cycles.py scripts/module_size.py
	$(UV) run --frozen mypy packages/*/bench
	MYPYPATH=packages/allocator/bench $(UV) run --frozen mypy e2e/bench

# Without PYTEST_ARGS: the e2e tests and the suites that need no cluster in two processes side
# by side (scripts/pytest_split.sh); PYTEST_SPLIT= runs them all in one.
PYTEST_SPLIT ?= 1
pytest: install ## the test suites of every package, e2e included
ifeq ($(PYTEST_SPLIT)$(PYTEST_ARGS),1)
	UV=$(UV) bash scripts/pytest_split.sh
else
	$(UV) run --frozen pytest $(PYTEST_ARGS)
endif

test: prepare lint typecheck pytest ## everything CI runs: lint, strict typing, all tests

demo: install ## the main job: a local cluster, the chart on fake GPUs, the seed walkthrough
	$(UV) run --frozen python deployments/demo_walkthrough.py $(DEMO_ARGS)

validate-demo: install ## offline: validate and summarise the seed and NVIDIA demo objects
	$(UV) run --frozen python scripts/demo.py

bench: prepare ## benchmarks (on demand; BENCH=name filters; installs the Debian packages the cluster benchmarks need), each printing ratios against a named baseline
	$(UV) run --frozen python -m bench $(BENCH)

proto: install ## regenerate the gRPC stubs of the kubelet plugin core from its .proto files
	$(MAKE) -C packages/kubelet-core proto UV=$(CURDIR)/$(UV)

gpu-check: install ## on a machine with an NVIDIA GPU: contract suite, slices, a claim, nvidia-smi -L via CDI (<5 min)
	$(UV) run --frozen python -m dra_e2e.gpu_check $(GPU_CHECK_ARGS)

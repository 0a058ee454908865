# jetlet developer targets. Each target sets itself up from nothing on a fresh clone.

VENV ?= .venv
PYTHON ?= python3

SRC_DIRS := worker operator tests bench examples

.PHONY: run test bench lint format clean

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
	$(VENV)/bin/python -m pip install -q -e '.[test,spark]'
	touch $@

run: $(VENV)/.stamp-run
	$(VENV)/bin/jetlet demo

test: $(VENV)/.stamp-test
	$(VENV)/bin/ruff check $(SRC_DIRS)
	$(VENV)/bin/ruff format --check $(SRC_DIRS)
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest

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

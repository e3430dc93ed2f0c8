# The two commands a new user runs; each sets up what it needs.
#   make demo  - creates .venv, installs tfperf[tensorflow], audits this machine and runs
#                tfperf's main job on its built-in workloads
#   make test  - creates .venv, installs tfperf[tensorflow,test], lints and runs the test suite

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= out

.PHONY: demo test lint clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[tensorflow,test]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/tfperf doctor

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests bench

test: lint
	$(BIN)/python -m pytest -q -ra

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .ruff_cache

# The two commands a new user runs; each sets up what it needs.
#   make demo  - creates .venv, installs tfperf[tensorflow], audits this machine (doctor), tunes
#                the built-in inference suite and a built-in training step (a quick tune each)
#                and writes HTML reports to out/
#   make test  - creates .venv, installs tfperf[tensorflow,openvino,jax,mlflow,ray,remote,ops,test], lints and runs the test suite

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= out
# The built-in batch-1 inference workloads that `make demo` tunes (their answers differ: XLA
# ahead of time, LiteRT int8 or fp16, OpenVINO, on a 2-core VM; add encoder and resnet50 for
# about four minutes more), and the built-in training step it tunes after them: 6.3 minutes
# on 2 cores with an empty cache, the doctor included.
DEMO_WORKLOADS ?= lstm mlp wide-deep mobilenetv2
DEMO_TRAIN ?= cnn-train
DEMO_STORE := $(OUT)/demo.sqlite

.PHONY: demo test lint clean

# uv installs what pip would (same resolver rule, byte-compiled as pip does) in half the time:
# parallel downloads and unpacking. `tfperf builds` uses it for candidate environments too.
INSTALL := $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv
	# ml_dtypes as tritonclient (installed below without its dependencies) asks: 0.7.0 costs
	# 0.5-0.9 s more at every start of a TensorFlow process (4.0-4.6 s against 3.3-4.0 s for
	# `import tensorflow`, five runs each), which the tests and the demo pay hundreds of times.
	$(INSTALL) -e '.[tensorflow,openvino,jax,mlflow,ray,remote,ops,test]' 'ml_dtypes<=0.5.4'
	# gRPC message definitions for `bench --url`, without the TensorFlow / protobuf they pin
	$(INSTALL) --no-deps tensorflow-serving-api==2.21.0 tritonclient==2.73.0
	touch $@

demo: $(BIN)/.installed
	mkdir -p $(OUT)
	$(BIN)/tfperf doctor
	set -e; for w in $(DEMO_WORKLOADS) $(DEMO_TRAIN); do \
	  $(BIN)/tfperf tune --workload $$w --quick --store $(DEMO_STORE) \
	    --profile-out $(OUT)/$$w.profile.json --out-dir $(OUT)/$$w; \
	  $(BIN)/tfperf report latest --store $(DEMO_STORE) --html $(OUT)/$$w.html > /dev/null; \
	done
	$(BIN)/tfperf history --store $(DEMO_STORE)
	@echo "HTML reports: $(foreach w,$(DEMO_WORKLOADS) $(DEMO_TRAIN),$(OUT)/$(w).html)"
	@echo "Apply a profile: $(BIN)/tfperf run --profile $(OUT)/$(firstword $(DEMO_WORKLOADS)).profile.json -- python your_script.py"

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests benchmarks

# --durations: every run's log says where the suite's time goes (the slowest tests and fixtures).
# The tests start tfperf processes by the hundred: its bytecode is compiled once here, also where
# PYTHONDONTWRITEBYTECODE would have every process compile it again.
# Three test processes on two cores: each test waits on the workers, servers and compilers it
# starts, and a third keeps the CPUs busy through those waits (the suite on a 2-core VM: 24:04
# against 28:28 with two). No test asserts a timing, and limits on a wait leave room for this.
test: lint
	$(BIN)/python -m compileall -q src
	$(BIN)/python -m pytest -q -ra -n 3 --dist loadfile --durations=40

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .ruff_cache

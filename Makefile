# Thin wrapper over CMake: `make demo` and `make test` are the two set-up commands.
BUILD_DIR := build/release
PYTHON := /usr/bin/python3
# The built-in demo model: a synthetic Qwen3-MoE checkpoint in the exact Hugging Face
# layout with random weights (so its text is meaningless); point `kiln run --model` at a
# real folder for real text.
DEMO_MODEL := build/models/qwen3-moe-demo
DEMO_PROMPT := The kiln fired the clay until it rang like a bell.

.PHONY: deps configure build demo test test-cpp test-python bench hostile-sweep clean

deps:
	@scripts/setup-deps

configure: deps
	@cmake --preset release >/dev/null

build: configure
	@cmake --build $(BUILD_DIR)

demo: build
	@test -f $(DEMO_MODEL)/config.json || $(BUILD_DIR)/kiln make-model --arch qwen3_moe --preset demo --out $(DEMO_MODEL)
	$(BUILD_DIR)/kiln run --model $(DEMO_MODEL) --prompt "$(DEMO_PROMPT)" -n 64

test-cpp: build
	cd $(BUILD_DIR) && ctest --output-on-failure

test-python: build
	PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) -m pytest -q tests/python

test: test-cpp test-python

bench: build
	$(BUILD_DIR)/kiln bench

# Generated hostile inputs against the Python API (crashes, hangs, silent wrong results,
# unclear errors), ~55,000 cases; SWEEP_ARGS=--quick for the CI-sized run.
hostile-sweep: build
	PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) scripts/hostile-sweep $(SWEEP_ARGS)

clean:
	rm -rf build

# Thin wrapper over CMake: `make demo` and `make test` are the two set-up commands.
BUILD_DIR := build/release
PYTHON := /usr/bin/python3

.PHONY: deps configure build demo test test-cpp test-python bench clean

deps:
	@scripts/setup-deps

configure: deps
	@cmake --preset release >/dev/null

build: configure
	@cmake --build $(BUILD_DIR)

demo: build
	$(BUILD_DIR)/kiln doctor

test-cpp: build
	cd $(BUILD_DIR) && ctest --output-on-failure

test-python: build
	PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) -m pytest -q tests/python

test: test-cpp test-python

bench: build
	$(BUILD_DIR)/kiln bench

clean:
	rm -rf build

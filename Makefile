# Thin wrapper over CMake: `make demo` and `make test` are the two set-up commands.
BUILD_DIR := build/release
PYTHON := /usr/bin/python3
# Compiler paths relative to each build folder in ccache's keys, so build/release, the
# wheel's build/wheel and another clone of the repository share compiled objects.
export CCACHE_BASEDIR ?= $(CURDIR)
# The built-in demo model: a synthetic Qwen3-MoE checkpoint in the exact Hugging Face
# layout with random weights (so its text is meaningless); point `kiln run --model` at a
# real folder for real text.
DEMO_MODEL := build/models/qwen3-moe-demo
DEMO_PROMPT := The kiln fired the clay until it rang like a bell.

.PHONY: deps configure build demo test test-cpp test-python test-torch-reference bench bench-torch hostile-sweep clean
.PHONY: test-chat-template-reference

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

# kiln's autograd against PyTorch 1.13 (Debian's python3-torch, installed here only):
# values and gradients. Not part of `make test`; skipped when torch is absent.
test-torch-reference: build
	@dpkg -s python3-torch >/dev/null 2>&1 || sudo apt-get install -y python3-torch || apt-get install -y python3-torch
	PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) -m pytest -q tests/reference

# kiln's chat-template evaluator against jinja2 (Debian's python3-jinja2, installed here
# only): the fixture files, the real templates and random expressions. Not in `make test`.
test-chat-template-reference: build
	@dpkg -s python3-jinja2 >/dev/null 2>&1 || sudo apt-get install -y python3-jinja2 || apt-get install -y python3-jinja2
	PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) -m pytest -q tests/reference/test_chat_template_jinja2.py

# Sanitizer and fuzzer builds (docs/testing.md): each preset has a folder of its own, so
# they never disturb the release build.
ASAN_DIR := build/asan
TSAN_DIR := build/tsan
FUZZ_DIR := build/fuzz
# The tests that start threads or swap thread pools: what the TSan build runs. Name a new
# concurrency test with "Thread" or "Concurren" in its suite or test name to include it.
TSAN_FILTER := *Thread*:*Concurren*:ExecutionContext*:SetNumThreads*
# Seconds each harness runs in `make fuzz` (fuzz/run -t).
FUZZ_SECONDS := 20
SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1:strict_init_order=1 UBSAN_OPTIONS=print_stacktrace=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp \
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

.PHONY: test-sanitize test-tsan fuzz

# The whole C++ suite under AddressSanitizer and UndefinedBehaviorSanitizer.
test-sanitize: deps
	@cmake --preset asan >/dev/null
	@cmake --build $(ASAN_DIR) --target kiln_tests
	$(SANITIZER_ENV) $(ASAN_DIR)/kiln_tests --gtest_brief=1

# The thread pool and concurrency tests under ThreadSanitizer.
test-tsan: deps
	@cmake --preset tsan >/dev/null
	@cmake --build $(TSAN_DIR) --target kiln_tests
	$(SANITIZER_ENV) $(TSAN_DIR)/kiln_tests --gtest_brief=1 --gtest_filter='$(TSAN_FILTER)'

# Every libFuzzer harness for FUZZ_SECONDS from the committed seeds (clang).
fuzz:
	@scripts/setup-deps --fuzz
	@cmake --preset fuzz >/dev/null
	@cmake --build $(FUZZ_DIR) --target fuzzers
	fuzz/run -t $(FUZZ_SECONDS)

bench: build
	$(BUILD_DIR)/kiln bench

# Generated hostile inputs against the Python API (crashes, hangs, silent wrong results,
# unclear errors), ~55,000 cases; SWEEP_ARGS=--quick for the CI-sized run.
bench-torch: build
	@dpkg -s python3-torch >/dev/null 2>&1 || sudo apt-get install -y python3-torch || apt-get install -y python3-torch
	PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) scripts/bench_vs_torch/run.py $(FILTER)

hostile-sweep: build
	PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) scripts/hostile-sweep $(SWEEP_ARGS)

# kiln's logits against Hugging Face transformers' modeling code on the tiny synthetic
# checkpoints of every architecture. Needs a Python with torch and transformers from PyPI
# (not in `make test`): python3 -m venv build/hf-venv && build/hf-venv/bin/pip install
# torch transformers safetensors
HF_PYTHON := build/hf-venv/bin/python
.PHONY: check-hf
check-hf: build
	KILN_PYTHONPATH=$(BUILD_DIR)/python $(HF_PYTHON) scripts/hf_reference_check.py

# `pip install .` end to end: builds the wheel (scikit-build-core from PyPI), installs it
# into a fresh venv outside the source tree and smoke-tests it (import and `kiln --help`).
# Not part of `make test`.
.PHONY: test-wheel
test-wheel: deps
	scripts/test-wheel $(PYTHON)

clean:
	rm -rf build

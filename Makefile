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
# they never disturb the release build. One clang build (build/asan) holds both the
# ASan+UBSan test suite and the libFuzzer harnesses: the library is compiled once for both.
ASAN_DIR := build/asan
TSAN_DIR := build/tsan
# The tests that start threads or swap thread pools: what the TSan build runs, those
# whose suite or test name contains one of these words. Name a new concurrency test with
# "Thread" or "Concurren" in it to include it. The TSan build compiles only the test
# sources that hold such a test (KILN_TEST_NAME_REGEX, cmake/test_selection.cmake).
TSAN_TEST_WORDS := Thread Concurren ExecutionContext
empty :=
space := $(empty) $(empty)
TSAN_FILTER := $(subst $(space),:,$(patsubst %,*%*,$(TSAN_TEST_WORDS)))
TSAN_NAME_REGEX := $(subst $(space),|,$(TSAN_TEST_WORDS))
# Seconds each harness runs in `make fuzz` (fuzz/run -t).
FUZZ_SECONDS := 20
SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1:strict_init_order=1 UBSAN_OPTIONS=print_stacktrace=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp \
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/sanitizers/tsan.supp

.PHONY: asan-configure build-asan test-sanitize build-tsan test-tsan fuzz

asan-configure:
	@scripts/setup-deps --fuzz
	@cmake --preset asan >/dev/null

# The sanitizer suite and every harness in one build (CI builds them in a stage of its own).
build-asan: asan-configure
	@cmake --build $(ASAN_DIR) --target kiln_tests fuzzers

# The whole C++ suite under AddressSanitizer and UndefinedBehaviorSanitizer (clang).
test-sanitize: asan-configure
	@cmake --build $(ASAN_DIR) --target kiln_tests
	$(SANITIZER_ENV) $(ASAN_DIR)/kiln_tests --gtest_brief=1

# Every libFuzzer harness for FUZZ_SECONDS from the committed seeds (clang).
fuzz: asan-configure
	@cmake --build $(ASAN_DIR) --target fuzzers
	fuzz/run -t $(FUZZ_SECONDS)

build-tsan: deps
	@cmake --preset tsan -DKILN_TEST_NAME_REGEX='$(TSAN_NAME_REGEX)' >/dev/null
	@cmake --build $(TSAN_DIR) --target kiln_tests

# The thread pool and concurrency tests under ThreadSanitizer. OpenBLAS's own threads are
# not instrumented; one BLAS thread keeps them out of the picture (kiln calls it
# single-threaded from its own pool anyway).
test-tsan: build-tsan
	$(SANITIZER_ENV) OPENBLAS_NUM_THREADS=1 $(TSAN_DIR)/kiln_tests --gtest_brief=1 --gtest_filter='$(TSAN_FILTER)'

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
# torch transformers safetensors accelerate (accelerate: transformers' FP8 loader needs it)
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

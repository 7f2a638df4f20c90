# Makefile: the entry points people and CI use. Everything installs itself:
# `make build`, `make test` and `make demo` work on a fresh Debian 12 machine.

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
LLVM_PREFIX ?= /usr/lib/llvm-22

.PHONY: all bootstrap build test demo fuzz clean

all: build

# Installs missing Debian packages and the pinned Python reference stack.
bootstrap:
	@scripts/bootstrap.sh

# Configures once; afterwards ninja re-runs CMake when a CMakeLists changes.
$(BUILD_DIR)/build.ninja: | bootstrap
	cmake -G Ninja -S . -B $(BUILD_DIR) \
	  -DMLIR_DIR=$(LLVM_PREFIX)/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_PREFIX)/bin/lit \
	  $(CMAKE_FLAGS)

build: bootstrap $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

# lit, GoogleTest and the runtime checks through ctest, then one summary line.
test: build
	scripts/run-tests.sh $(BUILD_DIR)

# The main job on the bundled example.
demo: build
	examples/demo.sh $(BUILD_DIR)

# libFuzzer on the ONNX importer for FUZZ_SECONDS (clang build in its own
# tree, instrumented with ASan/UBSan). Crashes land in $(FUZZ_DIR)/crashes.
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
fuzz: bootstrap
	scripts/fuzz.sh $(FUZZ_DIR) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD_DIR) $(FUZZ_DIR)

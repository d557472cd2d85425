# The Rust crates (bindings/rust: a2pack-sys, the raw C API whose bindings
# ship as src/bindings.rs, generated from a2pack.h by gen_bindings.py, and
# the safe a2pack crate): the bindings checked against the header, cargo test
# (unit, integration and doc tests, the cross-checks against the CLI and
# Python's bagz/numpy/a2pack included) and clippy with warnings as errors.
# They link the library `make build` made ($(BUILD)/liba2pack.so,
# A2PACK_SYS_LIB_DIR), so nothing is built twice; a plain `cargo test` in
# bindings/rust uses an installed liba2pack (pkg-config) or builds its own
# (feature `bundled`). No libclang is needed (bindgen is an optional
# feature); cargo comes from rustup when the machine has none.
CARGO ?= $(shell command -v cargo 2>/dev/null || echo $(HOME)/.cargo/bin/cargo)
RUST_DIR := bindings/rust

.PHONY: rust-toolchain test-rust
rust-toolchain:
	@$(INSTALL) rust $(CARGO)

# The static archive (CMake target a2pack_static: the shared library's own
# objects, no compile) is what a2pack-sys links when the folder has one, so
# the test programs and consumer-test's binary need no LD_LIBRARY_PATH.
#
# consumer-test/clean_build.sh then builds a consumer crate the way a user's
# first build goes: an empty CARGO_TARGET_DIR, no libclang, the library
# installed into a temporary prefix and found with pkg-config.
test-rust: build python test-deps rust-toolchain
	$(PYTHON) $(RUST_DIR)/a2pack-sys/gen_bindings.py --check
	cmake --build $(BUILD) --target a2pack_static
	cd $(RUST_DIR) && A2PACK_SYS_LIB_DIR=$(CURDIR)/$(BUILD) A2PACK_CLI=$(CURDIR)/$(BUILD)/a2pack \
	  A2PACK_PYTHON=$(PYTHON) $(CARGO) test --all-targets --no-fail-fast
	cd $(RUST_DIR) && A2PACK_SYS_LIB_DIR=$(CURDIR)/$(BUILD) A2PACK_CLI=$(CURDIR)/$(BUILD)/a2pack \
	  A2PACK_PYTHON=$(PYTHON) $(CARGO) test --doc
	cd $(RUST_DIR) && A2PACK_SYS_LIB_DIR=$(CURDIR)/$(BUILD) $(CARGO) clippy --all-targets -- -D warnings
	cd $(RUST_DIR) && A2PACK_SYS_LIB_DIR=$(CURDIR)/$(BUILD) CARGO=$(CARGO) consumer-test/run.sh
	cd $(RUST_DIR) && CARGO=$(CARGO) consumer-test/clean_build.sh $(CURDIR)/$(BUILD)

# What goes to crates.io: vendor.sh copies the C++ sources into a2pack-sys
# (for `bundled`), then both crates are packaged and a publish is rehearsed.
.PHONY: rust-package
rust-package: rust-toolchain
	$(RUST_DIR)/a2pack-sys/vendor.sh
	cd $(RUST_DIR) && A2PACK_SYS_LIB_DIR=$(CURDIR)/$(BUILD) $(CARGO) package --workspace --allow-dirty
	cd $(RUST_DIR) && A2PACK_SYS_LIB_DIR=$(CURDIR)/$(BUILD) $(CARGO) publish --workspace --dry-run --allow-dirty

TEST_EXTRA += test-rust

# The Julia package (bindings/julia/A2Pack). Julia is not installable on the
# machines `make test` runs on, so what can be checked without it always runs
# (bindings/julia/check_julia.py: LibA2Pack.jl regenerated from a2pack.h and
# compared, exported symbols vs wrappers, C vs Julia struct layouts, no
# ccall outside the generated layer); the package's own test suite runs when
# `julia` is on PATH. It uses only Julia's standard library. The syntax check
# parses the .jl files with tree-sitter's Julia grammar (PyPI, into the venv).
JULIA ?= julia
JULIA_PKG := bindings/julia/A2Pack
JULIA_PIP_PACKAGES := tree-sitter tree-sitter-julia

$(STAMPS)/pip-julia: mk/julia.mk | $(STAMPS)/pip
	$(call pip_install_missing,$(JULIA_PIP_PACKAGES))

.PHONY: test-julia
test-julia: build $(STAMPS)/pip-julia
	$(PYTHON) bindings/julia/check_julia.py --lib $(CURDIR)/$(BUILD)/liba2pack.so
	@if command -v $(JULIA) >/dev/null 2>&1; then \
	  echo "$(JULIA) --project=$(JULIA_PKG): Pkg.test()"; \
	  A2PACK_LIBRARY=$(CURDIR)/$(BUILD)/liba2pack.so A2PACK_CLI=$(CURDIR)/$(BUILD)/a2pack \
	    $(JULIA) --startup-file=no --project=$(JULIA_PKG) -e 'import Pkg; Pkg.test()'; \
	else \
	  echo "test-julia: julia is not on PATH - $(JULIA_PKG)/test/runtests.jl was NOT run (the checks without Julia above did run)"; \
	fi

TEST_EXTRA += test-julia

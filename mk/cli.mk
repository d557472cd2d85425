# The CLI surface: tests/python/test_cli_surface.py checks the zsh completion
# script with `zsh -n` (skipped where zsh is missing, so it runs here once
# zsh is installed); the rest of that file runs in test-python.
CLI_APT_PACKAGES := zsh

$(STAMPS)/apt-cli: mk/cli.mk
	$(call apt_install_missing,$(CLI_APT_PACKAGES))

.PHONY: test-cli
test-cli: python test-deps $(STAMPS)/apt-cli
	cd tests/python && A2PACK_CLI=$(CURDIR)/$(BUILD)/a2pack $(PYTHON) -m pytest -q -p no:cacheprovider \
	  test_cli_surface.py -k completion

TEST_EXTRA += test-cli

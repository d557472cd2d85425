# Object storage (src/storage: s3:// and gs:// paths) is built on libcurl and
# OpenSSL from Debian; CMake needs their headers at configure time, so the
# packages come in with `setup`. Its tests (tests/python/test_storage_*.py)
# start moto's S3 server and a GCS emulator on 127.0.0.1 themselves; both are
# in the package's [test] extra, so `make test` needs nothing more.
STORAGE_APT_PACKAGES := libcurl4-openssl-dev libssl-dev

$(STAMPS)/apt-storage: mk/storage.mk
	$(call apt_install_missing,$(STORAGE_APT_PACKAGES))

setup: $(STAMPS)/apt-storage

# scripts/pyproject_extra.py gives bare names, so moto's [server] extra
# (Flask and the rest of its server) is installed here for the S3 server the
# tests start.
$(STAMPS)/pip-storage: mk/storage.mk | $(STAMPS)/pip
	$(call pip_install_missing,moto[server])

test-deps: $(STAMPS)/pip-storage

# A production S3 server beside moto: the Versity S3 Gateway (Apache-2.0, a
# Go module), built into .tools/bin when Go is there. test_storage_roundtrip
# runs its S3 cases against it as well, and bench/storage_compare.py uses it
# for the full-size benchmark; without Go both go on with moto alone (the
# versitygw cases are skipped, saying why).
VERSITYGW_VERSION := v1.8.0
TOOLS_BIN := $(CURDIR)/.tools/bin

$(TOOLS_BIN)/versitygw: mk/storage.mk
	@$(INSTALL) go $(TOOLS_BIN) github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

.PHONY: storage-tools
storage-tools: $(TOOLS_BIN)/versitygw

test-deps: storage-tools

# Record files and packs: the check that `to-jsonl` fsyncs only with
# --durable counts fsync calls with strace (tests/python/
# test_pack_upstream_names.py skips it where strace is missing, so it runs
# here once strace is installed).
RECORDS_APT_PACKAGES := strace

$(STAMPS)/apt-records: mk/records.mk
	$(call apt_install_missing,$(RECORDS_APT_PACKAGES))

.PHONY: test-records
test-records: python test-deps $(STAMPS)/apt-records
	cd tests/python && A2PACK_CLI=$(CURDIR)/$(BUILD)/a2pack $(PYTHON) -m pytest -q -p no:cacheprovider \
	  test_pack_upstream_names.py -k fsync

TEST_EXTRA += test-records

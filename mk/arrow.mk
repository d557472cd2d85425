# The HTML report in a real browser: tests/report/ loads reports
# in Debian's headless Chromium, checks every plot rendered and that the
# replay slider moves the board, and keeps a screenshot in
# $(BUILD)/report-artifacts/. The Arrow and report tests without a browser
# are in tests/python/ (test_arrow.py, test_report.py) and run with the rest.
ARROW_APT_PACKAGES := chromium
ARROW_ARTIFACTS ?= $(BUILD)/report-artifacts

$(STAMPS)/apt-arrow: mk/arrow.mk | setup
	$(call apt_install_missing,$(ARROW_APT_PACKAGES))

.PHONY: test-arrow
test-arrow: build python test-deps $(STAMPS)/apt-arrow
	@mkdir -p $(ARROW_ARTIFACTS)
	cd tests/report && A2PACK_CLI=$(CURDIR)/$(BUILD)/a2pack A2PACK_REQUIRE_BROWSER=1 \
	  A2PACK_ARTIFACTS=$(CURDIR)/$(ARROW_ARTIFACTS) $(PYTHON) -m pytest -q -p no:cacheprovider .
	@echo "test-arrow: screenshot in $(ARROW_ARTIFACTS)/report.png"

TEST_EXTRA += test-arrow

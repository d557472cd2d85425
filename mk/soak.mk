# Soak test (README.md, "Checking"): minutes of concurrent pack/bag/dataset readers,
# a dataset appender and a logger, the writers SIGKILLed every few seconds;
# tests/soak/soak.py says what is checked. Not part of `make test`.
#   make soak [SOAK_SECONDS=180] [SOAK_READERS=3] [SOAK_SEED=1]
SOAK_SECONDS ?= 180
SOAK_READERS ?= 3
SOAK_SEED ?= 1

.PHONY: soak
soak: build python
	A2PACK_CLI=$(CURDIR)/$(BUILD)/a2pack timeout $$(( $(SOAK_SECONDS) + 900 )) \
	  $(PYTHON) tests/soak/soak.py --cli $(CURDIR)/$(BUILD)/a2pack \
	  --seconds $(SOAK_SECONDS) --readers $(SOAK_READERS) --seed $(SOAK_SEED)

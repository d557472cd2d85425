# Ray (a2pack.ray, tests/python/test_ray.py): the package's [test] extra names
# ray[data,train], but scripts/pyproject_extra.py gives bare names, so Ray Data
# and Ray Train's own dependencies (pandas, the train extras) are installed
# here, as storage.mk does for moto[server]. (A variable: a comma inside
# $(call ...) would split the argument.)
RAY_PIP_PACKAGES := ray[data,train]

$(STAMPS)/pip-ray: mk/ray.mk | $(STAMPS)/pip
	$(call pip_install_missing,$(RAY_PIP_PACKAGES))

test-deps: $(STAMPS)/pip-ray

# The PASS/FAIL bookkeeping the packaging checks share; sourced by
# check_install.sh and check_manylinux.sh, which print "$pass passed,
# $fail failed" at the end and exit non-zero on any failure.
pass=0
fail=0
check() {  # name, command...
  local name=$1; shift
  if "$@"; then echo "PASS $name"; pass=$((pass + 1)); else echo "FAIL $name"; fail=$((fail + 1)); fi
}
step() { echo "-- $*"; }

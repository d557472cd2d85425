#!/usr/bin/env bash
# Everything `make` installs goes through this one script, and each kind of
# thing is installed only when it is missing, so a second `make demo` or
# `make test` installs nothing. The lists of what to install stay beside the
# targets that need them (Makefile, mk/*.mk); this script is how.
#
#   install.sh apt PACKAGE...          Debian packages dpkg does not have
#                                      (through sudo unless run as root)
#   install.sh venv BASE_PYTHON VENV   the project's virtual environment
#   install.sh pip PYTHON PACKAGE...   Python packages that environment lacks
#                                      (a name with extras, ray[data], always
#                                      goes to pip for the extras' packages)
#   install.sh rust CARGO              a stable Rust toolchain with clippy
#                                      (rustup), when CARGO is not there
#   install.sh go BIN_DIR MODULE@VERSION
#                                      a Go tool into BIN_DIR, when Go is
#                                      there (without Go: a note, no error)
set -euo pipefail

die() { echo "install.sh: $*" >&2; exit 2; }

install_apt() {
  local missing=() p
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "apt-get install ${missing[*]}"
  local sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
}

install_venv() {
  local base=$1 venv=$2
  [ -x "$venv/bin/python" ] && return 0
  "$base" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
}

install_pip() {
  local python=$1; shift
  local missing=() p
  # `pip show` knows a distribution without its extras, and an installed one
  # may lack an extra's packages: a name with extras always goes to pip,
  # which installs only what is missing.
  for p in "$@"; do
    case $p in
      *\[*) missing+=("$p") ;;
      *) "$python" -m pip show -q "$p" >/dev/null 2>&1 || missing+=("$p") ;;
    esac
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "pip install ${missing[*]}"
  "$python" -m pip install -q "${missing[@]}"
}

install_rust() {
  local cargo=$1
  if ! [ -x "$cargo" ]; then
    echo "cargo not found: installing the stable toolchain with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c clippy
  fi
  local rustup
  rustup=$(command -v rustup || echo "$HOME/.cargo/bin/rustup")
  if [ -x "$rustup" ] && ! "$rustup" component list --installed 2>/dev/null | grep -q '^clippy'; then
    "$rustup" component add clippy
  fi
}

install_go() {
  local bin_dir=$1 module=$2 name
  name=$(basename "${module%@*}")
  [ -x "$bin_dir/$name" ] && return 0
  if ! command -v go >/dev/null; then
    echo "no Go toolchain: $name is not built (what needs it is skipped, saying why)"
    return 0
  fi
  echo "go install $module"
  GOBIN=$bin_dir go install "$module" || echo "warning: $name did not build (what needs it is skipped)"
}

[ $# -ge 1 ] || die "usage: install.sh apt|venv|pip|rust|go ARGS..."
kind=$1; shift
case $kind in
  apt) install_apt "$@" ;;
  venv) [ $# -eq 2 ] || die "usage: install.sh venv BASE_PYTHON VENV"; install_venv "$@" ;;
  pip) [ $# -ge 1 ] || die "usage: install.sh pip PYTHON PACKAGE..."; install_pip "$@" ;;
  rust) [ $# -eq 1 ] || die "usage: install.sh rust CARGO"; install_rust "$@" ;;
  go) [ $# -eq 2 ] || die "usage: install.sh go BIN_DIR MODULE@VERSION"; install_go "$@" ;;
  *) die "unknown kind '$kind' (apt, venv, pip, rust or go)" ;;
esac

#!/usr/bin/env bash
# Installs what `make bench` needs on a fresh Debian or Ubuntu machine, and nothing when it is
# already there: a C++ compiler, clang and libclang-dev (RocksDB's build compiles C++ and runs
# bindgen), cmake, pkg-config and liblz4-dev (the tidesdb crate builds TidesDB's C source with
# cmake and links the system's LZ4, the only codec the benchtool enables), and matplotlib for the
# charts. Only package registries are used (Debian, PyPI).
# Charts are optional: when matplotlib cannot be installed, the report says so and links none.
set -euo pipefail

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "bench/install-deps.sh: need root (or sudo) to run: $*" >&2
    return 1
  fi
}

has_libclang() {
  if command -v dpkg >/dev/null 2>&1; then
    dpkg -s libclang-dev >/dev/null 2>&1 && return 0
  fi
  ldconfig -p 2>/dev/null | grep -q 'libclang[-.0-9]*\.so'
}

has_lz4_dev() {
  if command -v dpkg >/dev/null 2>&1; then
    dpkg -s liblz4-dev >/dev/null 2>&1 && return 0
  fi
  pkg-config --exists liblz4 2>/dev/null
}

missing=()
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v clang >/dev/null 2>&1 || missing+=(clang)
has_libclang || missing+=(libclang-dev)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
has_lz4_dev || missing+=(liblz4-dev)
command -v python3 >/dev/null 2>&1 || missing+=(python3 python3-pip)

if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "bench/install-deps.sh: please install ${missing[*]} (no apt-get here)" >&2
    exit 1
  fi
  echo "Installing ${missing[*]} (needed to build RocksDB and TidesDB and draw charts)"
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi

if ! python3 -c 'import matplotlib' >/dev/null 2>&1; then
  echo "Installing matplotlib for the charts"
  python3 -m pip install --quiet matplotlib \
    || python3 -m pip install --quiet --user matplotlib \
    || python3 -m pip install --quiet --break-system-packages matplotlib \
    || as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y python3-matplotlib \
    || echo "warning: matplotlib could not be installed; the report will have no charts" >&2
fi

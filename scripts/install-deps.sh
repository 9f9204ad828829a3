#!/usr/bin/env bash
# Install what tilewave needs to build and run its tests on Debian 12: the one list of packages,
# used by README.md's quick start and by .ci/run. As root it runs apt-get itself (a fresh
# container has no sudo); as a user, through sudo.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if [ "$(id -u)" = 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
else
    echo "install-deps.sh: not root and no sudo: run it as root" >&2
    exit 1
fi
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq build-essential cmake pkg-config libhwloc-dev libtiff-dev \
    libopenslide-dev libinih-dev libcriterion-dev zlib1g-dev libzstd-dev libdeflate-dev \
    libglib2.0-dev libopenjp2-7-dev \
    libtiff-tools openslide-tools libvips-tools python3-numpy python3-scipy python3-skimage \
    python3-tifffile python3-openslide python3-shapely python3-pytest python3-pip libopenmpi-dev openmpi-bin \
    >/dev/null
# Higra for the tree of shapes' cross-check (tests/py/crosscheck_tos.py); Debian's numpy stays.
"${as_root[@]}" python3 -m pip install -q --break-system-packages higra==0.6.13 ||
    echo "install-deps.sh: higra not installed: py/crosscheck_tos will be skipped" >&2

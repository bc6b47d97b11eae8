#!/usr/bin/env bash
# Quick start, command 2: the whole test suite (unit tests of every layer,
# then the integration stories that run real jobs under `bcs run`).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build}
BUILD_DIR=$build "$here/deploy/build.sh"
cd "$build"
# Unit tests may run side by side; integration tests are RUN_SERIAL.
# --timeout is a backstop: every test also has its own TIMEOUT property.
ctest --output-on-failure -j2 --timeout 600 "$@"

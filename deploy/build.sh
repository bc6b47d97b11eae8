#!/usr/bin/env bash
# Configures and builds bcs into BUILD_DIR (default: ./build).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build}
"$here/deploy/install-deps.sh"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} >/dev/null
# Two jobs: the machine has two cores, and a gRPC translation unit takes ~400 MB.
cmake --build "$build" -j"${BUILD_JOBS:-2}"

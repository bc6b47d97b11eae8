#!/usr/bin/env bash
# Quick start, command 1: install the dependencies, build, and run a real MPI
# job (examples/hello.c, 4 ranks over 2 node managers) on the embedded
# default: a private machine manager and node managers on this host, torn
# down when the job ends.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build}
BUILD_DIR=$build "$here/deploy/build.sh"
echo "+ bcs run -n 4 --nodes 2 ./example_hello" >&2
cd "$build/bin"
exec ./bcs run --timeout 60s -n 4 --nodes 2 ./example_hello

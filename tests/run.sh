#!/usr/bin/env bash
# Quick start, command 2: the whole test suite (unit tests of every layer,
# then the integration stories that run real jobs under `bcs run`).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$here/build}
BUILD_DIR=$build "$here/deploy/build.sh"
# The deployment checks (slurm_three_hosts: deploy/test-slurm.sh,
# systemd_units_verify: deploy/systemd/verify.sh) need Slurm, munge and
# systemd-analyze: installed in CI or with BCS_WITH_DEPLOY=1; without them
# those tests report themselves skipped. CI also installs gdb: a story whose
# job hangs then reports the daemons' stacks.
if [ "${CI:-}" = true ] || [ "${BCS_WITH_DEPLOY:-0}" = 1 ]; then
  BCS_WITH_DEPLOY=1 BCS_WITH_DEBUGGER=$([ "${CI:-}" = true ] && echo 1 || echo 0) \
    "$here/deploy/install-deps.sh"
fi
cd "$build"
# Unit tests may run side by side; integration tests are RUN_SERIAL.
# --timeout is a backstop: every test also has its own TIMEOUT property.
ctest --output-on-failure -j2 --timeout 600 "$@"
# Then the coverage-guided fuzzers (tests/fuzz/README.md), BCS_FUZZ_SECONDS
# each (60 in CI; 0 skips them, the default outside CI: they need a clang
# build of their own, about three minutes).
fuzz=${BCS_FUZZ_SECONDS:-$([ "${CI:-}" = true ] && echo 60 || echo 0)}
if [ "$fuzz" -gt 0 ]; then
  "$here/tests/fuzz/run.sh" "$fuzz"
fi

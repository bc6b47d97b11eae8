#!/usr/bin/env bash
# Installs what bcs needs to build and test on Debian 12 (as root, or with
# sudo available). Idempotent: does nothing when everything is there.
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config
  libucx-dev ucx-utils
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev libgtest-dev libgmock-dev libcli11-dev libbenchmark-dev nlohmann-json3-dev
  iproute2 procps python3 openssl libssl-dev libmunge-dev
)
# Peers for bench/ only (never linked by bcs): BCS_WITH_PEERS=1 adds them.
if [ "${BCS_WITH_PEERS:-0}" = 1 ]; then pkgs+=(openmpi-bin libopenmpi-dev); fi
# The deployment checks: the three-host Slurm story (deploy/test-slurm.sh)
# needs Slurm and munge, deploy/systemd/verify.sh systemd-analyze.
if [ "${BCS_WITH_DEPLOY:-0}" = 1 ]; then pkgs+=(slurm-wlm munge systemd util-linux); fi
# A debugger for the tests' reports: a job that hangs on daemons a story
# started shows their threads' stacks (tests/integration/harness.h,
# threads_of).
if [ "${BCS_WITH_DEBUGGER:-0}" = 1 ]; then pkgs+=(gdb); fi
# The coverage-guided fuzzers (tests/fuzz/run.sh): clang's libFuzzer, ASan, UBSan.
if [ "${BCS_WITH_FUZZ:-0}" = 1 ]; then pkgs+=(clang libclang-rt-14-dev); fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
echo "bcs: installing ${missing[*]}" >&2
$SUDO apt-get -o DPkg::Lock::Timeout=900 update -qq
$SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

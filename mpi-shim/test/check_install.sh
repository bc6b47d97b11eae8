#!/bin/bash
# Installs bcs from a build tree into a fresh directory with
# `cmake --install --prefix`, moves the tree once (everything must be found
# relative to itself), then uses it as a user would:
#   - mpicc/mpicxx -showme:* give the moved tree's paths; BCS_PREFIX overrides;
#   - a downstream project built three ways: CMake's FindMPI through the
#     wrappers (its MPI_C and MPI_CXX must be ours), find_package(bcs), and
#     pkg-config (mpi-c / mpi-cxx / bcs...), each program run as a 1-rank
#     singleton without LD_LIBRARY_PATH and through the installed mpiexec;
#   - mpiexec: -n/-np, -x, --env, -genv forwarded to every rank, --host and
#     --hostfile placing ranks on node managers named after the hosts.
# Every run has a timeout (the harness's and bcs's own).
# Usage: check_install.sh BUILD_DIR DOWNSTREAM_SRC WORK_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
# Nothing of the build tree may leak in through the environment.
unset BCS_PREFIX BCS LD_LIBRARY_PATH BCS_SEGMENT_FD
export PATH=/usr/local/bin:/usr/bin:/bin

cmake --install "$build" --prefix "$work/first" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install"; }
mv "$work/first" "$work/moved"
p=$work/moved
for f in bin/mpicc bin/mpicxx bin/mpiexec bin/bcs bin/bcs-mm bin/bcs-nm include/mpi.h \
         lib/libmpi.so lib/cmake/bcs/bcsConfig.cmake lib/pkgconfig/mpi-c.pc; do
  [ -e "$p/$f" ] || fail "the install has no $f"
done
# Nothing may point at the build tree or the first prefix: not the text
# files (wrappers, packages), not the binaries' RUNPATH.
if grep -rIl -e "$work/first" -e "$build" "$p" ; then
  fail "the installed tree refers to the build tree or its first location"
fi
for elf in "$p"/bin/bcs "$p"/bin/bcs-mm "$p"/bin/bcs-nm "$p"/lib/libmpi.so.0; do
  if readelf -d "$elf" | grep -E 'R(UN)?PATH' | grep -e "$build" -e "$work/first"; then
    fail "$elf has a RUNPATH into the build tree or the first prefix"
  fi
done

# ---------------------------------------------------------------- -showme
[ "$("$p/bin/mpicc" -showme:incdirs)" = "$p/include" ] || fail "-showme:incdirs: $("$p/bin/mpicc" -showme:incdirs)"
[ "$("$p/bin/mpicc" -showme:libdirs)" = "$p/lib" ] || fail "-showme:libdirs: $("$p/bin/mpicc" -showme:libdirs)"
[ "$("$p/bin/mpicc" -showme:compile)" = "-I$p/include" ] || fail "-showme:compile"
[ "$("$p/bin/mpicc" -showme:link)" = "-L$p/lib -Wl,-rpath,$p/lib -lmpi" ] || fail "-showme:link: $("$p/bin/mpicc" -showme:link)"
[ "$("$p/bin/mpicxx" -showme:link)" = "-L$p/lib -Wl,-rpath,$p/lib -lmpi" ] || fail "mpicxx -showme:link"
[ "$("$p/bin/mpicc" -showme:libs)" = "mpi" ] || fail "-showme:libs"
case $("$p/bin/mpicc" -showme:version) in "mpicc: bcs "*) ;; *) fail "-showme:version" ;; esac
[ "$(BCS_CC=mycc "$p/bin/mpicc" -show -c x.c)" = "mycc -I$p/include -c x.c" ] || fail "-show -c"
[ "$(BCS_CXX=mycxx "$p/bin/mpicxx" -showme -o y y.o)" = "mycxx -I$p/include -o y y.o -L$p/lib -Wl,-rpath,$p/lib -lmpi" ] ||
  fail "mpicxx -showme"
# BCS_PREFIX overrides the location.
[ "$(BCS_PREFIX=/opt/x "$p/bin/mpicc" -showme:incdirs)" = "/opt/x/include" ] || fail "BCS_PREFIX"
# A symlink to the wrapper (e.g. from ~/bin) still finds the tree.
ln -s "$p/bin/mpicc" "$work/mpicc-link"
[ "$("$work/mpicc-link" -showme:incdirs)" = "$p/include" ] || fail "mpicc through a symlink"

# ---------------------------------------------------------------- helpers
run() {  # NAME mpiexec-args...: runs the installed mpiexec, output in $work/NAME.out
  local name=$1 rc=0
  shift
  timeout 120 "$p/bin/mpiexec" --timeout 60s "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  [ "$rc" = 0 ] || { cat "$work/$name.out" "$work/$name.err"; fail "$name: mpiexec $* exited $rc"; }
}
expect_line() {  # NAME LINE: the run NAME printed LINE
  grep -qxF "$2" "$work/$1.out" || { cat "$work/$1.out"; fail "$1: no line '$2'"; }
}
singleton() {  # PROGRAM EXPECTED: 1 rank, no runtime, no LD_LIBRARY_PATH
  local out
  out=$(timeout 60 env -u BCS_SEGMENT_FD -u LD_LIBRARY_PATH "$1") || fail "$1 as a singleton"
  [ "$out" = "$2" ] || fail "$1 as a singleton printed '$out'"
  # libmpi from the moved tree (the rpath), not from anywhere else.
  local libs lib
  libs=$(env -u LD_LIBRARY_PATH ldd "$1")
  lib=$(sed -n 's/^[[:space:]]*libmpi\.so\.0 => \(.*\) (0x.*/\1/p' <<<"$libs")
  [ -n "$lib" ] && [ "$(readlink -f "$lib")" = "$(readlink -f "$p/lib/libmpi.so.0")" ] ||
    { echo "$libs"; fail "$1 does not use $p/lib/libmpi"; }
}

# ---------------------------------------------------------------- CMake
for use in findmpi bcs; do
  b=$work/$use
  # As after `module load`: the wrappers first in PATH (another MPI may be
  # installed on the system: FindMPI must take ours).
  PATH="$p/bin:$PATH" cmake -S "$src" -B "$b" -DUSE=$use -DCMAKE_PREFIX_PATH="$p" \
    >"$work/$use.cmake.log" 2>&1 || { cat "$work/$use.cmake.log"; fail "configure ($use)"; }
  if [ $use = findmpi ]; then
    cache() { sed -n "s/^$1:[A-Z]*=//p" "$b/CMakeCache.txt"; }
    [ "$(cache MPI_C_COMPILER)" = "$p/bin/mpicc" ] || fail "FindMPI took MPI_C_COMPILER $(cache MPI_C_COMPILER)"
    [ "$(cache MPI_CXX_COMPILER)" = "$p/bin/mpicxx" ] || fail "FindMPI took MPI_CXX_COMPILER $(cache MPI_CXX_COMPILER)"
    [ "$(cache MPIEXEC_EXECUTABLE)" = "$p/bin/mpiexec" ] || fail "FindMPI took MPIEXEC_EXECUTABLE $(cache MPIEXEC_EXECUTABLE)"
    grep -q "Found MPI_C: " "$work/$use.cmake.log" || fail "FindMPI did not find MPI_C"
    grep -q "Found MPI_CXX: " "$work/$use.cmake.log" || fail "FindMPI did not find MPI_CXX"
    grep -q "Found MPI: TRUE (found version \"3.1\")" "$work/$use.cmake.log" ||
      { cat "$work/$use.cmake.log"; fail "FindMPI did not see MPI 3.1"; }
  fi
  cmake --build "$b" >"$work/$use.build.log" 2>&1 || { cat "$work/$use.build.log"; fail "build ($use)"; }
  singleton "$b/hello_c" "hello c 0/1 sum 0 - on -"
  singleton "$b/hello_cxx" "hello c++ 0/1 sum 0"
  # The project's own tests: 2 ranks through mpiexec as CMake knows it.
  (cd "$b" && timeout 300 ctest --output-on-failure >"$work/$use.ctest.log" 2>&1) ||
    { cat "$work/$use.ctest.log"; fail "$use: the downstream project's tests"; }
  run "$use" -np 3 "$b/hello_cxx"
  for r in 0 1 2; do expect_line "$use" "hello c++ $r/3 sum 3"; done
done

# FindMPI told where the tree is, not finding it in PATH.
for hint in "-DMPI_HOME=$p" "-DCMAKE_PREFIX_PATH=$p"; do
  b=$work/findmpi-hint
  rm -rf "$b"
  cmake -S "$src" -B "$b" "$hint" >"$b.log" 2>&1 || { cat "$b.log"; fail "configure with $hint"; }
  grep -qx "MPI_C_COMPILER:FILEPATH=$p/bin/mpicc" "$b/CMakeCache.txt" || fail "FindMPI with $hint: not our mpicc"
  grep -qx "MPI_CXX_COMPILER:FILEPATH=$p/bin/mpicxx" "$b/CMakeCache.txt" || fail "FindMPI with $hint: not our mpicxx"
done

# ---------------------------------------------------------------- pkg-config
# Only our files: PKG_CONFIG_LIBDIR replaces the system's directories, where
# another MPI's mpi-c.pc may be.
pc() { PKG_CONFIG_LIBDIR="$p/lib/pkgconfig" pkg-config "$@"; }
for name in bcs bcs-mpi mpi mpi-c mpi-cxx; do
  pc --exists "$name" || fail "pkg-config $name"
  # The paths are relative to the .pc file (${pcfiledir}/../..): resolve them.
  cflags=$(pc --cflags "$name")
  inc=${cflags#-I}
  [ "$(cd "${inc% }" && pwd -P)" = "$(cd "$p/include" && pwd -P)" ] || fail "pkg-config --cflags $name: $cflags"
  [ "$(cd "$(pc --variable=libdir "$name")" && pwd -P)" = "$(cd "$p/lib" && pwd -P)" ] ||
    fail "pkg-config libdir of $name: $(pc --variable=libdir "$name")"
  [[ $(pc --libs "$name") == *" -lmpi"* ]] || fail "pkg-config --libs $name: $(pc --libs "$name")"
done
[ "$(pc --modversion mpi-c)" = "$(pc --modversion bcs)" ] || fail "pkg-config versions differ"
# shellcheck disable=SC2046
cc -o "$work/hello_pc" "$src/hello.c" $(pc --cflags --libs mpi-c) || fail "cc with pkg-config mpi-c"
# shellcheck disable=SC2046
c++ -o "$work/hello_pcxx" "$src/hello.cc" $(pc --cflags --libs mpi-cxx) || fail "c++ with pkg-config mpi-cxx"
singleton "$work/hello_pc" "hello c 0/1 sum 0 - on -"
singleton "$work/hello_pcxx" "hello c++ 0/1 sum 0"
run pc -n 2 "$work/hello_pc"
expect_line pc "hello c 0/2 sum 1 - on node1"
expect_line pc "hello c 1/2 sum 1 - on node1"
run pcxx -n 2 "$work/hello_pcxx"
expect_line pcxx "hello c++ 1/2 sum 1"

# ---------------------------------------------------------------- mpiexec
hello=$work/bcs/hello_c
# Environment: -x NAME (its value here), --env, MPICH's -genv; every rank.
BCS_DOWNSTREAM_GREETING=exported run x -n 2 -x BCS_DOWNSTREAM_GREETING "$hello"
for r in 0 1; do expect_line x "hello c $r/2 sum 1 exported on node1"; done
run env -n 2 --nodes 2 --env BCS_DOWNSTREAM_GREETING=set "$hello"
# (which of node1/node2 registers first, and so gets rank 0, varies)
n0=$(sed -n 's|^hello c 0/2 sum 1 set on \(node[12]\)$|\1|p' "$work/env.out")
n1=$(sed -n 's|^hello c 1/2 sum 1 set on \(node[12]\)$|\1|p' "$work/env.out")
[ -n "$n0" ] && [ -n "$n1" ] && [ "$n0" != "$n1" ] || { cat "$work/env.out"; fail "--env on 2 node managers"; }
run genv -n 1 -genv BCS_DOWNSTREAM_GREETING "two words" "$hello"
expect_line genv "hello c 0/1 sum 0 two words on node1"
if "$p/bin/mpiexec" -n 1 --env BCS_RANK=5 "$hello" 2>"$work/rankenv.err"; then fail "--env BCS_RANK accepted"; fi
grep -q "set by bcs itself" "$work/rankenv.err" || fail "--env BCS_RANK: $(cat "$work/rankenv.err")"
# Hosts: node managers named after them, ranks filling their slots in order.
run host -n 3 --host a:2,b "$hello"
expect_line host "hello c 0/3 sum 3 - on a"
expect_line host "hello c 1/3 sum 3 - on a"
expect_line host "hello c 2/3 sum 3 - on b"
printf '# two hosts\nbeta slots=1\nalpha slots=2\n' >"$work/hosts"
run hostfile --hostfile "$work/hosts" "$hello"  # -n: the 3 slots
expect_line hostfile "hello c 0/3 sum 3 - on beta"
expect_line hostfile "hello c 1/3 sum 3 - on alpha"
expect_line hostfile "hello c 2/3 sum 3 - on alpha"
printf 'alpha slots=two\n' >"$work/badhosts"
if "$p/bin/mpiexec" --hostfile "$work/badhosts" "$hello" 2>"$work/badhosts.err"; then fail "bad host file accepted"; fi
grep -q "badhosts:1: 'two' is not a number of slots" "$work/badhosts.err" || fail "bad host file: $(cat "$work/badhosts.err")"
# The program's own arguments are its own, even ones mpiexec knows.
run own -n 1 /bin/echo -np 7 --env X=1 --host z
[ "$(cat "$work/own.out")" = "-np 7 --env X=1 --host z" ] || fail "program arguments rewritten: $(cat "$work/own.out")"
echo "install ok"

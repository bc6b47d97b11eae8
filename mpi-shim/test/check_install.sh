#!/bin/bash
# Installs bcs from a build tree into a fresh directory, moves the tree once
# (everything must be found relative to itself), then builds and runs a
# downstream project three ways: CMake's FindMPI through the wrappers,
# find_package(bcs), and pkg-config. Runs go through the installed mpiexec
# with -n, --env, -x and --host, each under a timeout.
# Usage: check_install.sh BUILD_DIR DOWNSTREAM_SRC WORK_DIR
set -euo pipefail
build=$1
src=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/first" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install"; }
mv "$work/first" "$work/moved"
p=$work/moved
# Nothing may point at the build tree or the first prefix.
if grep -rIl -e "$work/first" -e "$build/" "$p/bin" "$p/lib" 2>/dev/null | grep -v '\.so' ; then
  fail "the installed tree refers to the build tree or its first location"
fi

# -showme: the moved tree's own paths.
[ "$("$p/bin/mpicc" -showme:incdirs)" = "$p/include" ] || fail "-showme:incdirs: $("$p/bin/mpicc" -showme:incdirs)"
case $("$p/bin/mpicc" -showme:link) in
  "-L$p/lib"*" -lmpi") ;;
  *) fail "-showme:link: $("$p/bin/mpicc" -showme:link)" ;;
esac
[ "$("$p/bin/mpicc" -showme:libs)" = "mpi" ] || fail "-showme:libs"
"$p/bin/mpicc" -showme:version | grep -q "bcs" || fail "-showme:version"
# BCS_PREFIX overrides the location.
[ "$(BCS_PREFIX=/opt/x "$p/bin/mpicc" -showme:incdirs)" = "/opt/x/include" ] || fail "BCS_PREFIX"

run() {  # NAME TIMEOUT mpiexec-args...
  local name=$1 t=$2
  shift 2
  timeout "$t" "$p/bin/mpiexec" --timeout 60s "$@" >"$work/$name.out" 2>"$work/$name.err" ||
    { cat "$work/$name.err"; fail "$name: mpiexec $* exited $?"; }
}

for use in findmpi bcs; do
  PATH="$p/bin:$PATH" cmake -S "$src" -B "$work/$use" -DUSE=$use -DCMAKE_PREFIX_PATH="$p" \
    >"$work/$use.cmake.log" 2>&1 || { cat "$work/$use.cmake.log"; fail "configure ($use)"; }
  cmake --build "$work/$use" >"$work/$use.build.log" 2>&1 ||
    { cat "$work/$use.build.log"; fail "build ($use)"; }
  # Singleton (no runtime), then 3 ranks on 2 node managers through mpiexec.
  out=$(env -u BCS_SEGMENT_FD "$work/$use/hello_c") || fail "$use singleton"
  [ "$out" = "hello c 0/1 sum 0 -" ] || fail "$use singleton printed '$out'"
  run "$use" 120 -np 3 --host a,b,c -- "$work/$use/hello_cxx"
  for r in 0 1 2; do
    grep -q "^hello c++ $r/3 sum 3$" "$work/$use.out" || { cat "$work/$use.out"; fail "$use rank $r"; }
  done
done

# mpiexec: --host with unequal slots is refused; equal slots -> nodes x ppn.
if "$p/bin/mpiexec" --host a:2,b:1 true 2>"$work/unequal.err"; then fail "unequal slots accepted"; fi
grep -q "different slot counts" "$work/unequal.err" || fail "unequal slots message"
printf 'a slots=2\n# comment\nb slots=2\n' >"$work/hosts"
BCS_DOWNSTREAM_FROM_ENV=yes run hostfile 120 --hostfile "$work/hosts" \
  --env BCS_DOWNSTREAM_GREETING=hi -x BCS_DOWNSTREAM_FROM_ENV "$work/bcs/hello_c"
for r in 0 1 2 3; do
  grep -q "^hello c $r/4 sum 6 hi$" "$work/hostfile.out" || { cat "$work/hostfile.out"; fail "hostfile rank $r"; }
done
# The program's own arguments are its own, even ones mpiexec knows.
run own 120 -n 1 /bin/echo -np 7 --env X=1
[ "$(cat "$work/own.out")" = "-np 7 --env X=1" ] || fail "program arguments rewritten: $(cat "$work/own.out")"

# pkg-config, from the moved tree.
for pc in bcs-mpi mpi-c mpi-cxx; do
  PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --exists "$pc" || fail "pkg-config $pc"
done
cc -o "$work/hello_pc" "$src/hello.c" $(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --cflags --libs bcs-mpi) ||
  fail "build with pkg-config"
run pc 120 -n 2 "$work/hello_pc"
grep -q "^hello c 1/2 sum 1 -$" "$work/pc.out" || { cat "$work/pc.out"; fail "pkg-config program"; }
echo "install ok"

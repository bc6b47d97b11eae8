#!/bin/sh
# Checks the build tree's mpicc/mpicxx/mpiexec: strict C99 and C++17 builds
# of programs including mpi.h, that they run without LD_LIBRARY_PATH (the
# rpath), as singletons and through mpiexec, and -show / -showme:*.
# (check_install.sh does the same for an installed, moved tree.)
# Usage: check_wrappers.sh <bindir with mpicc/mpicxx> <dir with sources> <scratch dir>
set -eu
bindir=$1
srcdir=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bindir/mpicc" -std=c99 -O2 -Wall -Wextra -Werror -pedantic -o "$work/header_c" "$srcdir/header_c.c" \
  || fail "mpicc -std=c99 -pedantic -Werror"
out=$(env -u BCS_SEGMENT_FD -u LD_LIBRARY_PATH "$work/header_c") || fail "C program exited non-zero"
[ "$out" = "c header ok" ] || fail "C program printed '$out'"

"$bindir/mpicxx" -std=c++17 -O2 -Wall -Wextra -Werror -pedantic -o "$work/header_cxx" "$srcdir/header_cxx.cc" \
  || fail "mpicxx -std=c++17 -pedantic -Werror"
out=$(env -u BCS_SEGMENT_FD -u LD_LIBRARY_PATH "$work/header_cxx") || fail "C++ program exited non-zero"
[ "$out" = "c++ header ok" ] || fail "C++ program printed '$out'"

# Compile-only then link separately.
"$bindir/mpicc" -c -std=c99 -Wall -Wextra -Werror -pedantic -o "$work/header_c.o" "$srcdir/header_c.c" \
  || fail "mpicc -c"
"$bindir/mpicc" -o "$work/header_c2" "$work/header_c.o" || fail "mpicc link of an object"

# -show: prints the command, with -lmpi and the rpath only when linking.
show=$(BCS_CC=mycc "$bindir/mpicc" -show -O2 x.c)
case $show in
  "mycc -I"*" -O2 x.c -L"*" -Wl,-rpath,"*" -lmpi") ;;
  *) fail "mpicc -show printed '$show'" ;;
esac
show=$(BCS_CC=mycc "$bindir/mpicc" -show -c x.c)
case $show in
  *-lmpi*|*rpath*) fail "mpicc -show -c links: '$show'" ;;
  "mycc -I"*" -c x.c") ;;
  *) fail "mpicc -show -c printed '$show'" ;;
esac
show=$(BCS_CXX=mycxx "$bindir/mpicxx" -show y.cc)
case $show in
  "mycxx -I"*" y.cc -L"*" -lmpi") ;;
  *) fail "mpicxx -show printed '$show'" ;;
esac

# -showme:*: what build systems ask for. mpi.h and libmpi must be where the
# wrappers say (the header is generated into the build tree).
inc=$("$bindir/mpicc" -showme:incdirs)
lib=$("$bindir/mpicc" -showme:libdirs)
[ -f "$inc/mpi.h" ] || fail "-showme:incdirs '$inc' has no mpi.h"
[ -f "$lib/libmpi.so" ] || fail "-showme:libdirs '$lib' has no libmpi.so"
[ "$("$bindir/mpicc" -showme:compile)" = "-I$inc" ] || fail "-showme:compile"
[ "$("$bindir/mpicc" -showme:link)" = "-L$lib -Wl,-rpath,$lib -lmpi" ] || fail "-showme:link"
[ "$("$bindir/mpicc" -showme:libs)" = "mpi" ] || fail "-showme:libs"
[ "$("$bindir/mpicxx" -showme:incdirs)" = "$inc" ] || fail "mpicxx -showme:incdirs"
case $("$bindir/mpicc" -showme:version) in "mpicc: bcs "*" (Language: C)") ;; *) fail "mpicc -showme:version" ;; esac
case $("$bindir/mpicxx" -showme:version) in "mpicxx: bcs "*" (Language: C++)") ;; *) fail "mpicxx -showme:version" ;; esac
"$bindir/mpicc" -showme:help | grep -q "showme:compile" || fail "-showme:help"
if "$bindir/mpicc" -showme:bogus 2>"$work/bogus.err"; then fail "-showme:bogus accepted"; fi
grep -q "unknown option -showme:bogus" "$work/bogus.err" || fail "-showme:bogus message"
# MPICH's spellings.
[ "$(BCS_CC=mycc "$bindir/mpicc" -compile_info x.c)" = "mycc -I$inc x.c" ] || fail "-compile_info"
[ "$(BCS_CC=mycc "$bindir/mpicc" -link-info x.o)" = "mycc -I$inc x.o -L$lib -Wl,-rpath,$lib -lmpi" ] ||
  fail "-link-info"
# BCS_PREFIX overrides where the tree is.
case $(BCS_PREFIX=/opt/elsewhere "$bindir/mpicc" -showme:incdirs) in
  /opt/elsewhere/*) ;;
  *) fail "BCS_PREFIX ignored" ;;
esac
# Called through a symlink from elsewhere: still finds its tree.
ln -s "$(cd "$bindir" && pwd)/mpicc" "$work/my-mpicc"
[ "$("$work/my-mpicc" -showme:incdirs)" = "$inc" ] || fail "mpicc through a symlink"
# Compiler flags pass through untouched, in order.
show=$(BCS_CC=mycc "$bindir/mpicc" -show -DX="a b" -Wl,--as-needed -o out x.c -lm)
[ "$show" = "mycc -I$inc -DX=a b -Wl,--as-needed -o out x.c -lm -L$lib -Wl,-rpath,$lib -lmpi" ] ||
  fail "flags not passed through: '$show'"

# mpiexec from the build tree: 2 ranks, an --env setting each rank sees.
out=$(timeout 120 "$bindir/mpiexec" --timeout 60s -n 2 --env BCS_WRAP_TEST=seen -l \
  /bin/sh -c 'echo "rank $BCS_RANK $BCS_WRAP_TEST"' | sort) || fail "mpiexec -n 2"
[ "$out" = "[0] rank 0 seen
[1] rank 1 seen" ] || fail "mpiexec -n 2 printed '$out'"
"$bindir/mpiexec" --version | grep -q "bcs" || fail "mpiexec --version"
# MPICH's MPIEXEC_TIMEOUT ends a job that runs too long (exit 124, as bcs run --timeout).
rc=0
MPIEXEC_TIMEOUT=2 timeout 120 "$bindir/mpiexec" -n 1 /bin/sleep 100 2>/dev/null || rc=$?
[ "$rc" = 124 ] || fail "MPIEXEC_TIMEOUT=2 mpiexec sleep 100 exited $rc, not 124"
if MPIEXEC_TIMEOUT=soon "$bindir/mpiexec" -n 1 true 2>/dev/null; then fail "MPIEXEC_TIMEOUT=soon accepted"; fi
if "$bindir/mpiexec" --bind-to core -n 1 true 2>"$work/mpiexec.err"; then fail "mpiexec took an unknown option"; fi
grep -q "unknown option --bind-to" "$work/mpiexec.err" || fail "mpiexec unknown option message"
echo "wrappers ok"

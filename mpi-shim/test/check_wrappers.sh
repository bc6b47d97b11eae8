#!/bin/sh
# Checks the generated mpicc/mpicxx wrappers: strict C99 and C++17 builds of
# programs including mpi.h, that they run (singleton mode), and `-show`.
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
out=$(env -u BCS_SEGMENT_FD "$work/header_c") || fail "C program exited non-zero"
[ "$out" = "c header ok" ] || fail "C program printed '$out'"

"$bindir/mpicxx" -std=c++17 -O2 -Wall -Wextra -Werror -pedantic -o "$work/header_cxx" "$srcdir/header_cxx.cc" \
  || fail "mpicxx -std=c++17 -pedantic -Werror"
out=$(env -u BCS_SEGMENT_FD "$work/header_cxx") || fail "C++ program exited non-zero"
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
echo "wrappers ok"

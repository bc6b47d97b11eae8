# Sourced by bench/gang.sh and bench/slurm_gang.sh: the gang scheduling mix
# (one long halo stencil, then three short jobs of other kinds), built into
# $tmp with $bin/mpicc. The caller sets the sizes first: $long_steps,
# $short_work, $small_iters, $large_iters.
#
#   names        the jobs, the long one first
#   cmd_of NAME  its command line
"$bin/mpicc" -O2 -o "$tmp/halo" "$here/bench/halo.c"
"$bin/mpicc" -O2 -o "$tmp/compute" "$here/bench/compute.c"
"$bin/mpicc" -O2 -o "$tmp/coll" "$here/bench/coll_bench.c"
# shellcheck disable=SC2034 # used by the scripts that source this file
names=(long compute allreduce large)
cmd_of() {
  case $1 in
    long) echo "$tmp/halo blocking 100000 $long_steps" ;;
    compute) echo "$tmp/compute work $short_work" ;;
    allreduce) echo "$tmp/coll allreduce 8 $small_iters" ;;
    large) echo "$tmp/coll allreduce 4M $large_iters" ;;
  esac
}

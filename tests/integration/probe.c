/* What one user can do to another user's rank (identity_test.cc): run as
 * the other user against a rank's pid, it tries each way in and prints one
 * line per way, "WAY ok" or "WAY ERRNO-NAME":
 *   signal0   kill(pid, 0)                   (may it signal it at all)
 *   sigcont   kill(pid, SIGCONT)             (wake a suspended rank)
 *   ptrace    PTRACE_ATTACH                  (debug it)
 *   mem       open /proc/pid/mem             (read or write its memory)
 *   vm_readv  process_vm_readv of 1 byte     (cross-memory attach)
 *   segment   open /proc/pid/fd/3            (its job's segment)
 * Not an MPI program. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(const char* way, int rc) {
  if (rc == 0)
    printf("%s ok\n", way);
  else
    printf("%s %s\n", way, strerrorname_np(errno) ? strerrorname_np(errno) : "?");
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: it_probe PID\n");
    return 2;
  }
  const pid_t pid = (pid_t)atol(argv[1]);
  char path[64];
  say("signal0", kill(pid, 0));
  say("sigcont", kill(pid, SIGCONT));
  const long at = ptrace(PTRACE_ATTACH, pid, NULL, NULL);
  say("ptrace", at == 0 ? 0 : -1);
  if (at == 0) {
    waitpid(pid, NULL, __WALL);
    ptrace(PTRACE_DETACH, pid, NULL, NULL);
  }
  snprintf(path, sizeof path, "/proc/%ld/mem", (long)pid);
  int fd = open(path, O_RDWR);
  say("mem", fd >= 0 ? 0 : -1);
  if (fd >= 0) close(fd);
  char byte;
  struct iovec local = {&byte, 1}, remote = {(void*)0x10000, 1};
  /* EPERM is decided before the address: a permitted read of an unmapped
   * address would say EFAULT. */
  say("vm_readv", process_vm_readv(pid, &local, 1, &remote, 1, 0) == 1 ? 0 : -1);
  snprintf(path, sizeof path, "/proc/%ld/fd/3", (long)pid);
  fd = open(path, O_RDWR);
  say("segment", fd >= 0 ? 0 : -1);
  if (fd >= 0) close(fd);
  return 0;
}

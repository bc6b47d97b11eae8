/* A rank that leaves a process behind the way daemons do: fork, setsid
 * (a new session and process group, out of the rank's group), fork again,
 * and the middle process exits, so the grandchild is an orphan in no group
 * of ours. The grandchild sleeps forever holding the rank's stdout. The
 * rank prints "escapee PID" and exits 0 (no MPI). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
  int p[2];
  if (pipe(p) != 0) return 1;
  pid_t mid = fork();
  if (mid < 0) return 1;
  if (mid == 0) {
    if (setsid() < 0) _exit(1);
    pid_t g = fork();
    if (g < 0) _exit(1);
    if (g == 0) {
      pid_t me = getpid();
      if (write(p[1], &me, sizeof me) != (ssize_t)sizeof me) _exit(1);
      close(p[1]);
      for (;;) pause();
    }
    _exit(0);
  }
  close(p[1]);
  waitpid(mid, NULL, 0);
  pid_t g = 0;
  if (read(p[0], &g, sizeof g) != (ssize_t)sizeof g) return 1;
  printf("escapee %d\n", (int)g);
  return 0;
}

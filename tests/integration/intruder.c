/* A rank that behaves like a hostile program (issue 7): before MPI_Init it
 * lists its fds and writes 4 KiB of junk into every one it was not meant to
 * get (anything but stdin, stdout, stderr and the segment), then connects to
 * every TCP port the daemons listen on (their pids are the arguments; the
 * ports come from /proc/net/tcp and /proc/net/tcp6 through the daemons'
 * socket inodes) and writes junk there too. Then it runs a barrier: the job
 * must still work. Prints "rank R: F foreign fds, P ports hit" and, on rank
 * 0, "intruder done". */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static char junk[4096];

static int count_foreign_fds(void) {
  const char* seg_env = getenv("BCS_SEGMENT_FD");
  int seg = seg_env ? atoi(seg_env) : -1;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int foreign = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    int fd = atoi(e->d_name);
    if (fd <= 2 || fd == seg || fd == dirfd(d)) continue;
    char path[64], target[256] = "?";
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n > 0) target[n] = 0;
    printf("foreign fd %d -> %s\n", fd, target);
    ++foreign;
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    if (write(fd, junk, sizeof junk) < 0 && errno != EAGAIN) { /* whatever it is */ }
  }
  closedir(d);
  return foreign;
}

/* Adds the socket inodes of /proc/PID/fd to inodes[]. */
static int socket_inodes(long pid, unsigned long* inodes, int n, int cap) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%ld/fd", pid);
  DIR* d = opendir(dir);
  if (!d) return n;
  struct dirent* e;
  while ((e = readdir(d)) != NULL && n < cap) {
    char path[320], target[64];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    ssize_t k = readlink(path, target, sizeof target - 1);
    if (k <= 0) continue;
    target[k] = 0;
    unsigned long ino;
    if (sscanf(target, "socket:[%lu]", &ino) == 1) inodes[n++] = ino;
  }
  closedir(d);
  return n;
}

static int attack(const char* file, int v6, const unsigned long* inodes, int n) {
  FILE* f = fopen(file, "r");
  if (!f) return 0;
  char line[512];
  int hits = 0;
  if (!fgets(line, sizeof line, f)) {
    fclose(f);
    return 0;
  }
  while (fgets(line, sizeof line, f)) {
    char local[64], remote[64];
    unsigned state;
    unsigned long inode;
    if (sscanf(line, "%*d: %63s %63s %x %*s %*s %*s %*d %*d %lu", local, remote, &state,
               &inode) != 4 ||
        state != 0x0A)
      continue;
    int ours = 0;
    for (int i = 0; i < n; ++i) ours |= inodes[i] == inode;
    if (!ours) continue;
    char* colon = strchr(local, ':');
    if (!colon) continue;
    unsigned port = (unsigned)strtoul(colon + 1, NULL, 16);
    *colon = 0;
    int s;
    if (!v6) {
      struct sockaddr_in a = {0};
      a.sin_family = AF_INET;
      a.sin_port = htons((uint16_t)port);
      a.sin_addr.s_addr = (in_addr_t)strtoul(local, NULL, 16); /* already network order */
      if (a.sin_addr.s_addr == 0) a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      s = socket(AF_INET, SOCK_STREAM, 0);
      if (s < 0 || connect(s, (struct sockaddr*)&a, sizeof a) != 0) {
        if (s >= 0) close(s);
        continue;
      }
    } else {
      struct sockaddr_in6 a = {0};
      a.sin6_family = AF_INET6;
      a.sin6_port = htons((uint16_t)port);
      for (int w = 0; w < 4; ++w) {
        char word[9];
        memcpy(word, local + 8 * w, 8);
        word[8] = 0;
        uint32_t v = (uint32_t)strtoul(word, NULL, 16);
        memcpy(&a.sin6_addr.s6_addr[4 * w], &v, 4);
      }
      s = socket(AF_INET6, SOCK_STREAM, 0);
      if (s < 0 || connect(s, (struct sockaddr*)&a, sizeof a) != 0) {
        if (s >= 0) close(s);
        continue;
      }
    }
    if (write(s, junk, sizeof junk) > 0) ++hits;
    close(s);
  }
  fclose(f);
  return hits;
}

int main(int argc, char** argv) {
  memset(junk, 0xA5, sizeof junk);
  int foreign = count_foreign_fds();
  unsigned long inodes[4096];
  int n = 0;
  for (int i = 1; i < argc; ++i) n = socket_inodes(atol(argv[i]), inodes, n, 4096);
  int hits = attack("/proc/net/tcp", 0, inodes, n) + attack("/proc/net/tcp6", 1, inodes, n);

  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  printf("rank %d: %d foreign fds, %d ports hit\n", rank, foreign, hits);
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("intruder done\n");
  MPI_Finalize();
  return 0;
}

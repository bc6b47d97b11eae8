// RAII owners for file descriptors and memory mappings.
#pragma once

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <utility>

namespace bcs {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Closes every fd >= 3 except those in keep[0..n) (n <= 8), for a child
// between fork and exec: what a daemon holds (UCX opens its sockets without
// close-on-exec) must never reach a program it starts. Only
// async-signal-safe system calls. `max_fd` is the loop bound for kernels
// without close_range(2) (compute it before fork, e.g. from RLIMIT_NOFILE).
inline void close_fds_except(const int* keep, int n, int max_fd) {
  int k[8];
  int m = 0;
  for (int i = 0; i < n && m < 8; ++i)
    if (keep[i] >= 3) k[m++] = keep[i];
  for (int i = 1; i < m; ++i)  // insertion sort: no library call
    for (int j = i; j > 0 && k[j - 1] > k[j]; --j) {
      int t = k[j];
      k[j] = k[j - 1];
      k[j - 1] = t;
    }
  auto close_between = [&](unsigned lo, unsigned hi) {  // [lo, hi]
    if (lo > hi) return;
    if (::syscall(SYS_close_range, lo, hi, 0) == 0) return;
    for (unsigned fd = lo; fd <= hi && fd < static_cast<unsigned>(max_fd); ++fd) ::close(static_cast<int>(fd));
  };
  unsigned from = 3;
  for (int i = 0; i < m; ++i) {
    if (static_cast<unsigned>(k[i]) > from) close_between(from, static_cast<unsigned>(k[i]) - 1);
    from = static_cast<unsigned>(k[i]) + 1;
  }
  close_between(from, ~0U);
}

class Mapping {
 public:
  Mapping() = default;
  Mapping(void* p, size_t n) : p_(p), n_(n) {}
  ~Mapping() { reset(); }
  Mapping(Mapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  void* get() const { return p_; }
  size_t size() const { return n_; }
  void reset() {
    if (p_) ::munmap(p_, n_);
    p_ = nullptr;
    n_ = 0;
  }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace bcs

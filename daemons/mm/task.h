// Task<T>: the coroutine type of the strobe sender's per-job code.
//
// One thread drives the slices of every running job (strobe_sender.cc).
// Each job's slice loop is written straight, as when a thread ran one job
// at a time, and suspends where it used to block: waiting for a
// microphase on the job's nodes, for the next slice's start, for the
// nodes to start the job. The strobe sender resumes it when something
// changed (a report, a bell, a deadline). A Task awaited by another runs
// to its end inside it and resumes it (symmetric transfer); a top-level
// one is started and resumed through JobRun (job_run.h).
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <utility>

namespace bcs::mm {

template <class T>
class [[nodiscard]] Task {
 public:
  struct promise_type {
    std::optional<T> value;
    std::exception_ptr error;
    std::coroutine_handle<> continuation;  // the awaiting coroutine, if any
    Task get_return_object() {
      return Task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    // Lazy: an awaiter or the strobe sender starts it.
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct Final {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        auto c = h.promise().continuation;
        return c ? c : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    Final final_suspend() noexcept { return {}; }
    template <class U>
    void return_value(U&& v) {
      value.emplace(std::forward<U>(v));
    }
    // Carried to the awaiter (or to whoever checks a top-level task).
    void unhandled_exception() { error = std::current_exception(); }
  };
  using Handle = std::coroutine_handle<promise_type>;

  Task() = default;  // none yet
  Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Task& operator=(Task&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  // Destroying a suspended task destroys the tasks it awaits (they are
  // temporaries of its frame): a job's code can be dropped at any wait.
  ~Task() {
    if (h_) h_.destroy();
  }

  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
    h_.promise().continuation = awaiting;
    return h_;
  }
  T await_resume() {
    if (h_.promise().error) std::rethrow_exception(h_.promise().error);
    return std::move(*h_.promise().value);
  }

  // For the driver of a top-level task.
  Handle handle() const { return h_; }
  bool done() const { return !h_ || h_.done(); }
  std::exception_ptr error() const { return h_ ? h_.promise().error : nullptr; }

 private:
  explicit Task(Handle h) : h_(h) {}
  Handle h_{};
};

}  // namespace bcs::mm

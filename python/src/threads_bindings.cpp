// `with kiln.threads(n):`: ops the calling thread runs inside the block use a pool of n
// threads; other threads, and this one after the block, are unaffected.
//
// A ContextScope belongs to the OS thread that made it, and scopes on one thread must end
// innermost first (each restores the one it replaced). Python can break both rules (a
// scope object handed to another thread, __exit__ called by hand, generators), so every
// exit is checked and a broken rule is a RuntimeError instead of a corrupted context.
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "bindings.h"
#include "kiln/context.h"

namespace kiln::python {
namespace {

class ThreadsBlock {
 public:
  explicit ThreadsBlock(int num_threads) : num_threads_(num_threads) {}
  ThreadsBlock(const ThreadsBlock&) = delete;
  ThreadsBlock& operator=(const ThreadsBlock&) = delete;

  ~ThreadsBlock() {
    if (!scope_) return;
    if (std::this_thread::get_id() == owner_ && innermost()) {
      close();
      return;
    }
    // Never exited and dropped elsewhere: ending the scope here would rewrite this
    // thread's context, so it is left open (its pool lives on) on its own thread.
    (void)scope_.release();
  }

  ThreadsBlock& enter() {
    if (scope_) throw std::runtime_error("kiln.threads: this block is already entered; use one kiln.threads(n) per with");
    scope_ = std::make_unique<ThreadsScope>(num_threads_);
    owner_ = std::this_thread::get_id();
    open_blocks().push_back(this);
    return *this;
  }

  void exit() {
    if (!scope_) throw std::runtime_error("kiln.threads: exit without a matching enter");
    if (std::this_thread::get_id() != owner_) {
      throw std::runtime_error("kiln.threads: a block must be exited on the thread that entered it");
    }
    if (!innermost()) throw std::runtime_error("kiln.threads: blocks must be exited innermost first");
    close();
  }

  int num_threads() const { return num_threads_; }

 private:
  // This thread's entered blocks, innermost last.
  static std::vector<ThreadsBlock*>& open_blocks() {
    thread_local std::vector<ThreadsBlock*> blocks;
    return blocks;
  }
  bool innermost() const { return !open_blocks().empty() && open_blocks().back() == this; }
  void close() {
    scope_.reset();
    open_blocks().pop_back();
  }

  int num_threads_;
  std::unique_ptr<ThreadsScope> scope_;
  std::thread::id owner_;
};

}  // namespace

void bind_threads(py::module_& m) {
  py::class_<ThreadsBlock>(m, "_ThreadsBlock")
      .def(py::init<int>(), py::arg("n"))
      .def("__enter__", &ThreadsBlock::enter, py::return_value_policy::reference)
      .def("__exit__", [](ThreadsBlock& block, const py::args&) {
        block.exit();
        return false;  // exceptions raised in the block propagate
      })
      .def_property_readonly("num_threads", &ThreadsBlock::num_threads);
}

}  // namespace kiln::python

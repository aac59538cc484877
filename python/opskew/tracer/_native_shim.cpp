// _native_shim.cpp: opskew's RecordFunction callback, the only C++ in opskew.
//
// Compiled against the user's torch at first use (opskew/native.py, through
// torch.utils.cpp_extension, cached per torch version and this file's hash),
// never at install. It forwards every operator's begin and end to opskew's C
// runtime through two function addresses Python hands it (osk_native_begin
// and osk_native_end of libopskew_native.so), so it needs no link to that
// library. Python calls the extern "C" functions below through ctypes; none
// lets a C++ exception out.
//
// The callback asks for no inputs, outputs or ids: RecordFunction then boxes
// nothing, and the name is all the tracer records. Scopes: all, as
// emit_itt() registers them (an empty scope set means every scope), so
// forward and backward aten operators, autograd nodes and user scopes.
#include <ATen/record_function.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace {

using begin_fn = void (*)(const char *);
using end_fn = void (*)();

std::atomic<begin_fn> g_begin{nullptr};
std::atomic<end_fn> g_end{nullptr};

// Sessions, counted: a thread started during a session (mode 2) forwards
// only in the session it was attached in. It keeps its callback until it
// ends (only the thread itself can remove it), and a later session must not
// record it ("threads already running are not recorded"). The thread that
// starts a session (mode 0) removes its callback at the stop: it needs no
// check, and the operators it runs pay none.
std::atomic<uint64_t> g_epoch{0};
thread_local uint64_t t_epoch = 0;

std::unique_ptr<at::ObserverContext> on_begin(const at::RecordFunction &fn) {
  g_begin.load(std::memory_order_relaxed)(fn.name());
  return nullptr;
}

void on_end(const at::RecordFunction &, at::ObserverContext *) { g_end.load(std::memory_order_relaxed)(); }

// t_epoch 0: a thread that never attached runs the callback because autograd
// handed it the attached thread's state (backward on a device thread).
bool current() {
  uint64_t e = t_epoch;
  return e == 0 || e == g_epoch.load(std::memory_order_relaxed);
}

std::unique_ptr<at::ObserverContext> on_begin_thread(const at::RecordFunction &fn) {
  if (current()) g_begin.load(std::memory_order_relaxed)(fn.name());
  return nullptr;
}

void on_end_thread(const at::RecordFunction &, at::ObserverContext *) {
  if (current()) g_end.load(std::memory_order_relaxed)();
}

// The bare floor (bench only): a callback that counts and calls nothing.
thread_local uint64_t t_count = 0;

std::unique_ptr<at::ObserverContext> count_begin(const at::RecordFunction &) {
  ++t_count;
  return nullptr;
}

void count_end(const at::RecordFunction &, at::ObserverContext *) {}

at::RecordFunctionCallback make(int mode) {
  auto cb = mode == 1   ? at::RecordFunctionCallback(count_begin, count_end)
            : mode == 2 ? at::RecordFunctionCallback(on_begin_thread, on_end_thread)
                        : at::RecordFunctionCallback(on_begin, on_end);
  cb.needsInputs(false).needsOutputs(false).needsIds(false);
  return cb;
}

struct Range {
  std::string name;
  at::RecordFunction rf{at::RecordScope::USER_SCOPE};
  explicit Range(const char *n) : name(n) {}
};

thread_local at::CallbackHandle t_handle = 0;
std::atomic<at::CallbackHandle> g_handle{0};

}  // namespace

extern "C" {

// Sets the runtime's entry points for a new session; call before attaching.
void osk_shim_set(void *begin, void *end) {
  g_begin.store(reinterpret_cast<begin_fn>(begin), std::memory_order_relaxed);
  g_end.store(reinterpret_cast<end_fn>(end), std::memory_order_relaxed);
  g_epoch.fetch_add(1, std::memory_order_relaxed);
}

// Mode 0: forward to the runtime; 1: count only (the bare floor); 2: forward
// in this session only (a thread started during it).
// Thread-local: this thread, and the autograd work it hands to other threads
// (autograd propagates thread-local RecordFunction state). Returns 0, 1 if
// already attached on this thread, -1 on failure.
int osk_shim_attach_thread(int mode) {
  t_epoch = g_epoch.load(std::memory_order_relaxed);  // this session's, attached now or before
  if (t_handle) return 1;
  try {
    t_handle = at::addThreadLocalCallback(make(mode));
    return 0;
  } catch (...) {
    return -1;
  }
}

void osk_shim_detach_thread() {
  if (!t_handle) return;
  try {
    at::removeCallback(t_handle);
  } catch (...) {
  }
  t_handle = 0;
}

// Global: every thread of the process, already running or not.
int osk_shim_attach_global(int mode) {
  if (g_handle.load()) return 1;
  try {
    g_handle.store(at::addGlobalCallback(make(mode == 2 ? 0 : mode)));
    return 0;
  } catch (...) {
    return -1;
  }
}

void osk_shim_detach_global() {
  at::CallbackHandle h = g_handle.exchange(0);
  if (!h) return;
  try {
    at::removeCallback(h);
  } catch (...) {
  }
}

// Operators the counting callback saw on this thread.
uint64_t osk_shim_count() { return t_count; }

// A user-scope range, as torch's record_function opens it (the same
// RecordFunction, scope and name, so the same "user_annotation" event in a
// torch.profiler trace), without torch.ops' Python dispatch around it:
// opskew.profile's ProfilerStep#N ranges (docs/profile.md). The name is
// copied and outlives the RecordFunction (members end in reverse order).
// Returns NULL on failure; end it on the thread that began it.
void *osk_shim_range_begin(const char *name) {
  try {
    std::unique_ptr<Range> r(new Range(name));  // freed (and ended) if before() throws
    if (r->rf.isActive()) r->rf.before(r->name.c_str());
    return r.release();
  } catch (...) {
    return nullptr;
  }
}

void osk_shim_range_end(void *h) {
  auto *r = static_cast<Range *>(h);
  if (!r) return;
  try {
    r->rf.end();
  } catch (...) {
  }
  delete r;
}

}  // extern "C"

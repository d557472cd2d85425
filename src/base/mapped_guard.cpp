#include "base/mapped_guard.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "base/error.hpp"

namespace a2pack {

namespace {

// ---------------------------------------------------------------- guards
// The innermost guard of each thread, in a pthread key rather than a
// thread_local: the handler reads it on any thread, and pthread_getspecific
// neither allocates nor locks, where the first access to a thread_local of
// a dlopen()ed library may do both.
std::atomic<bool> g_key_ready{false};
pthread_key_t g_key;

pthread_key_t guard_key() {
  static const pthread_key_t key = [] {
    pthread_key_t k;
    if (pthread_key_create(&k, nullptr) != 0) std::abort();  // out of keys: nothing can work
    g_key = k;
    g_key_ready.store(true, std::memory_order_release);
    return k;
  }();
  return key;
}

mapped_guard_detail::Frame* guard_of_this_thread() noexcept {
  if (!g_key_ready.load(std::memory_order_acquire)) return nullptr;
  return static_cast<mapped_guard_detail::Frame*>(pthread_getspecific(g_key));
}

// ---------------------------------------------------------------- registry
// What the handler reads: a table of address ranges it scans without
// locking (faults are rare, so a linear scan is fine). Tables only grow;
// an outgrown one is kept (never freed), so a handler still scanning it
// reads valid memory.
struct Slot {
  std::atomic<uintptr_t> begin{0}, end{0};
};
struct Table {
  size_t cap = 0;
  Slot* slots = nullptr;
};
std::atomic<Table*> g_table{nullptr};

// What the guards' errors read, under g_mu.
struct Entry {
  uintptr_t end;
  size_t slot;
  std::string path;
  uint64_t size;
  dev_t dev;
  ino_t ino;
};
std::mutex g_mu;
std::map<uintptr_t, Entry> g_entries;
std::vector<size_t> g_free_slots;
size_t g_used_slots = 0;

bool registered(uintptr_t a) noexcept {
  const Table* t = g_table.load(std::memory_order_acquire);
  if (!t) return false;
  for (size_t i = 0; i < t->cap; ++i) {
    const uintptr_t b = t->slots[i].begin.load(std::memory_order_acquire);
    if (b && a >= b && a < t->slots[i].end.load(std::memory_order_relaxed)) return true;
  }
  return false;
}

size_t take_slot() {  // g_mu held
  if (!g_free_slots.empty()) {
    size_t s = g_free_slots.back();
    g_free_slots.pop_back();
    return s;
  }
  Table* t = g_table.load(std::memory_order_relaxed);
  if (!t || g_used_slots == t->cap) {
    auto* bigger = new Table;
    bigger->cap = t ? 2 * t->cap : 64;
    bigger->slots = new Slot[bigger->cap];
    for (size_t i = 0; t && i < t->cap; ++i) {
      bigger->slots[i].end.store(t->slots[i].end.load(std::memory_order_relaxed), std::memory_order_relaxed);
      bigger->slots[i].begin.store(t->slots[i].begin.load(std::memory_order_relaxed), std::memory_order_relaxed);
    }
    g_table.store(bigger, std::memory_order_release);  // the old table stays, unused
  }
  return g_used_slots++;
}

// ---------------------------------------------------------------- handler
// Handlers that were installed before a2pack's, most recent last; entries
// are written once, before the index that publishes them.
constexpr int kMaxChained = 8;
struct sigaction g_chained[kMaxChained];
std::atomic<int> g_current_chain{-1};
int g_chain_count = 0;  // g_mu

// Loop breakers for faults handed on (see chain()): the thread handing one
// on now, and the last kernel fault that a handled-on handler returned from.
std::atomic<long> g_chaining_tid{0};
std::atomic<long> g_returned_tid{0};
std::atomic<uintptr_t> g_returned_addr{0};

long this_tid() noexcept { return static_cast<long>(::syscall(SYS_gettid)); }

bool kernel_fault(const siginfo_t* si) noexcept { return si && si->si_code > 0; }
bool raised_here(const siginfo_t* si) noexcept {
  return si && si->si_code <= 0 && si->si_pid == ::getpid();
}

// The default action: the process ends by the signal, as without a handler.
void die_of(int sig) noexcept {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
  ::raise(sig);
  // A fault that returns here runs its access again, which now ends the process.
}

// Hands a SIGBUS that is not a2pack's to the handler installed before.
// Two loops are broken by ending the process instead: a handler that
// re-raises the signal after restoring its predecessor (a2pack's again: the
// raise comes back here while this thread is still handing on), and one
// that returns from a fault without mending it (the access faults again at
// the same address).
void chain(int sig, siginfo_t* si, void* ctx) noexcept {
  const long me = this_tid();
  const uintptr_t addr = si ? reinterpret_cast<uintptr_t>(si->si_addr) : 0;
  if (raised_here(si) && g_chaining_tid.load() == me) return die_of(sig);
  if (kernel_fault(si) && g_returned_tid.load() == me && g_returned_addr.load() == addr)
    return die_of(sig);
  const int c = g_current_chain.load(std::memory_order_acquire);
  if (c < 0) return die_of(sig);
  const struct sigaction& h = g_chained[c];
  void (*plain)(int) = h.sa_handler;
  if (plain == SIG_DFL) return die_of(sig);
  if (plain == SIG_IGN) {
    if (kernel_fault(si)) return die_of(sig);  // a fault cannot be ignored: the kernel kills
    return;
  }
  long none = 0;
  const bool marked = g_chaining_tid.compare_exchange_strong(none, me);
  if (h.sa_flags & SA_SIGINFO)
    h.sa_sigaction(sig, si, ctx);
  else
    plain(sig);
  if (marked) g_chaining_tid.store(0);
  if (kernel_fault(si)) {
    g_returned_tid.store(me);
    g_returned_addr.store(addr);
  }
}

void on_sigbus(int sig, siginfo_t* si, void* ctx) {
  const int saved_errno = errno;
  mapped_guard_detail::Frame* f = guard_of_this_thread();
  if (f && kernel_fault(si) && registered(reinterpret_cast<uintptr_t>(si->si_addr))) {
    f->fault = si->si_addr;
    errno = saved_errno;
    siglongjmp(f->env, 1);
  }
  // A handler installed after a2pack's that hands the fault on by raising
  // the signal again (Python's faulthandler, once it has restored a2pack's):
  // this thread is in a guard, so returning lets the access run again and
  // fault into the branch above.
  if (f && raised_here(si) && g_chaining_tid.load() != this_tid()) {
    errno = saved_errno;
    return;
  }
  chain(sig, si, ctx);
  errno = saved_errno;
}

// Installs a2pack's handler unless it is the one in place, chaining to the
// one it replaces. g_mu held.
void ensure_handler() {
  struct sigaction cur;
  if (::sigaction(SIGBUS, nullptr, &cur) != 0) return;
  if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigbus) return;
  if (g_chain_count == kMaxChained) return;  // another library keeps replacing it: leave it be
  g_chained[g_chain_count] = cur;
  g_current_chain.store(g_chain_count, std::memory_order_release);
  ++g_chain_count;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  // NODEFER: leaving by siglongjmp without restoring a mask, SIGBUS must
  // not have been blocked on entry. ONSTACK: a thread's alternate stack
  // when it has one (a fault may come from a stack overflow).
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, nullptr);
}

// A child forked while another thread held g_mu must not wait for it.
void atfork_prepare() { g_mu.lock(); }
void atfork_release() { g_mu.unlock(); }

}  // namespace

namespace mapped_guard_detail {
Frame* current() noexcept { return static_cast<Frame*>(pthread_getspecific(guard_key())); }
void set_current(Frame* f) noexcept { pthread_setspecific(guard_key(), f); }
}  // namespace mapped_guard_detail

void register_mapping(const void* base, size_t len, const std::string& path, int fd) {
  if (!base || !len) return;
  guard_key();  // before any guard can need it
  static const bool at_fork = (pthread_atfork(atfork_prepare, atfork_release, atfork_release), true);
  (void)at_fork;
  struct stat st;
  std::memset(&st, 0, sizeof st);
  if (fd >= 0) (void)::fstat(fd, &st);
  const auto b = reinterpret_cast<uintptr_t>(base);
  std::lock_guard<std::mutex> lk(g_mu);
  ensure_handler();
  const size_t s = take_slot();
  Slot& slot = g_table.load(std::memory_order_relaxed)->slots[s];
  slot.end.store(b + len, std::memory_order_relaxed);
  slot.begin.store(b, std::memory_order_release);
  g_entries[b] = Entry{b + len, s, path, len, st.st_dev, st.st_ino};
}

void unregister_mapping(const void* base) {
  const auto b = reinterpret_cast<uintptr_t>(base);
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_entries.find(b);
  if (it == g_entries.end()) return;
  Slot& slot = g_table.load(std::memory_order_relaxed)->slots[it->second.slot];
  slot.begin.store(0, std::memory_order_release);
  slot.end.store(0, std::memory_order_relaxed);
  g_free_slots.push_back(it->second.slot);
  g_entries.erase(it);
}

void fail_mapped_read(const void* addr) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  Entry e{};
  bool found = false;
  uint64_t offset = 0;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_entries.upper_bound(a);
    if (it != g_entries.begin()) {
      --it;
      if (a < it->second.end) {
        e = it->second;
        offset = a - it->first;
        found = true;
      }
    }
  }
  if (!found)
    fail(A2PACK_E_IO, "a mapped file could not be read at address {} (bus error)", addr);
  struct stat st;
  if (::stat(e.path.c_str(), &st) != 0)
    fail(A2PACK_E_CORRUPT,
         "{}: offset {} of the mapped file could not be read: the file was cut short while it "
         "was mapped ({} bytes when opened) and is gone from its name now",
         e.path, offset, e.size);
  if (e.ino && (st.st_dev != e.dev || st.st_ino != e.ino))
    fail(A2PACK_E_CORRUPT,
         "{}: offset {} of the mapped file could not be read: the file was cut short while it "
         "was mapped ({} bytes when opened), and another file has its name now",
         e.path, offset, e.size);
  const auto now = static_cast<uint64_t>(st.st_size);
  if (now <= offset)
    fail(A2PACK_E_CORRUPT,
         "{}: the file shrank to {} bytes while it was mapped ({} bytes when opened), so offset "
         "{} can no longer be read: another process truncated or rewrote it in place. Open it "
         "again; read files that others rewrite without a mapping",
         e.path, now, e.size, offset);
  fail(A2PACK_E_IO,
       "{}: reading offset {} of the mapped file failed (bus error: an I/O error, or the file "
       "was cut short and grew again; {} bytes now, {} when opened)",
       e.path, offset, now, e.size);
}

void guarded_copy(void* dst, const void* src, size_t n) {
  if (n) guarded_read([&] { std::memcpy(dst, src, n); });
}

}  // namespace a2pack

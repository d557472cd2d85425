// Guarded reads of the library's mappings (base/mapped_guard.hpp): a file
// cut short under a MappedFile makes a guarded read throw an Error naming
// it; every other SIGBUS still ends the process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "base/file_io.hpp"
#include "base/mapped_guard.hpp"
#include "test_util.hpp"

using namespace a2pack;
using a2test::status_of;
using a2test::TempDir;

namespace {

constexpr size_t kFileBytes = 64 << 10;

std::string make_file(const TempDir& dir, const std::string& name) {
  std::vector<uint8_t> bytes(kFileBytes);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  std::string path = dir / name;
  a2test::write_bytes(path, bytes.data(), bytes.size());
  return path;
}

}  // namespace

TEST(MappedGuard, ReadPastANewEndThrowsNamingTheFile) {
  TempDir dir;
  const std::string path = make_file(dir, "cut.bin");
  MappedFile m(path);
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  uint8_t buf[16];
  std::string msg;
  EXPECT_EQ(status_of([&] { guarded_copy(buf, m.data() + 60000, sizeof buf); }, &msg),
            A2PACK_E_CORRUPT);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("shrank to 4096 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset 60000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("65536 bytes when opened"), std::string::npos) << msg;
  // What is still in the file reads as before, with or without a guard.
  guarded_copy(buf, m.data() + 100, sizeof buf);
  EXPECT_EQ(buf[0], static_cast<uint8_t>(100 * 7));
  EXPECT_EQ(mapped_guard_detail::current(), nullptr);
}

TEST(MappedGuard, ReplacedFileIsNamedAsSuch) {
  TempDir dir;
  const std::string path = make_file(dir, "old.bin");
  MappedFile m(path);
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  make_file(dir, "new.bin");
  ASSERT_EQ(std::rename((dir / "new.bin").c_str(), path.c_str()), 0);
  uint8_t b;
  std::string msg;
  EXPECT_EQ(status_of([&] { guarded_copy(&b, m.data() + 5000, 1); }, &msg), A2PACK_E_CORRUPT);
  EXPECT_NE(msg.find("another file has its name now"), std::string::npos) << msg;
}

TEST(MappedGuard, NestedGuardsAndExceptionsLeaveTheRightGuardInPlace) {
  TempDir dir;
  const std::string path = make_file(dir, "nest.bin");
  MappedFile m(path);
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  std::string msg;
  a2pack_status st = status_of([&] {
    guarded_read([&] {
      // An inner guard left by an exception of its own...
      EXPECT_EQ(status_of([&] { guarded_read([] { fail(A2PACK_E_OUT_OF_RANGE, "inner"); }); }),
                A2PACK_E_OUT_OF_RANGE);
      // ... and one left by a fault: the outer guard is current again.
      EXPECT_NE(guarded_fault([&] { volatile uint8_t x = m.data()[20000]; (void)x; }), nullptr);
      volatile uint8_t y = m.data()[30000];  // caught by the outer guard
      (void)y;
      ADD_FAILURE() << "the read past the end did not fault";
    });
  }, &msg);
  EXPECT_EQ(st, A2PACK_E_CORRUPT);
  EXPECT_NE(msg.find("offset 30000"), std::string::npos) << msg;
  EXPECT_EQ(mapped_guard_detail::current(), nullptr);
}

TEST(MappedGuard, EveryThreadHasItsOwnGuard) {
  TempDir dir;
  const std::string path = make_file(dir, "threads.bin");
  MappedFile m(path);
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  MapFault fault;
  std::atomic<int> faulted{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int k = 0; k < 50; ++k) {
        const void* at = guarded_fault([&] {
          volatile uint8_t x = m.data()[8192 + 4096 * static_cast<size_t>((t + k) % 12)];
          (void)x;
        });
        if (!fault.record(at)) faulted.fetch_add(1);
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(faulted.load(), 200);
  EXPECT_EQ(status_of([&] { fault.raise_if_any(); }), A2PACK_E_CORRUPT);
}

TEST(MappedGuard, AnUnmappedFileIsNoLongerTheLibrarys) {
  // A mapping gone and another made at the same address: the registry
  // follows (the fault names the new file).
  TempDir dir;
  const std::string a = make_file(dir, "a.bin"), b = make_file(dir, "b.bin");
  { MappedFile m(a); }
  MappedFile m(b);
  ASSERT_EQ(::truncate(b.c_str(), 4096), 0);
  uint8_t x;
  std::string msg;
  EXPECT_EQ(status_of([&] { guarded_copy(&x, m.data() + 9000, 1); }, &msg), A2PACK_E_CORRUPT);
  EXPECT_NE(msg.find(b), std::string::npos) << msg;
}

using MappedGuardDeathTest = testing::Test;

TEST(MappedGuardDeathTest, ForeignSigbusStillEndsTheProcess) {
  TempDir dir;
  const std::string path = make_file(dir, "installed.bin");
  MappedFile m(path);  // installs the handler
  // Raised by the program.
  EXPECT_EXIT(::raise(SIGBUS), testing::KilledBySignal(SIGBUS), "");
  // A fault in a mapping a2pack did not make, inside a guard: not the
  // library's (it may be a caller's output buffer).
  const std::string other = make_file(dir, "other.bin");
  EXPECT_EXIT(
      {
        int fd = ::open(other.c_str(), O_RDONLY);
        auto* p = static_cast<const uint8_t*>(::mmap(nullptr, kFileBytes, PROT_READ, MAP_SHARED, fd, 0));
        if (::truncate(other.c_str(), 0) != 0) std::_Exit(3);
        uint8_t x;
        guarded_copy(&x, p + 10000, 1);
        std::_Exit(0);
      },
      testing::KilledBySignal(SIGBUS), "");
  // The library's own mapping read outside any guard (a user's view).
  EXPECT_EXIT(
      {
        if (::truncate(path.c_str(), 0) != 0) std::_Exit(3);
        volatile uint8_t x = m.data()[10000];
        (void)x;
        std::_Exit(0);
      },
      testing::KilledBySignal(SIGBUS), "");
}

namespace {
void torch_like_handler(int sig, siginfo_t*, void*) {
  // As torch's DataLoader workers do: say so, restore the default, raise.
  const char msg[] = "later handler ran\n";
  (void)!::write(2, msg, sizeof msg - 1);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}
void returning_handler(int, siginfo_t*, void*) {}

void install(void (*h)(int, siginfo_t*, void*)) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = h;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  ::sigaction(SIGBUS, &sa, nullptr);
}
}  // namespace

TEST(MappedGuardDeathTest, AHandlerInstalledLaterIsChainedAtTheNextMapping) {
  // Each scenario changes the process's handlers: run in a child.
  TempDir dir;
  const std::string a = make_file(dir, "a.bin"), b = make_file(dir, "b.bin");
  EXPECT_EXIT(
      {
        MappedFile first(a);
        install(torch_like_handler);  // replaces a2pack's, hands nothing on
        MappedFile second(b);         // a2pack's goes back on top, chaining to it
        if (::truncate(b.c_str(), 4096) != 0) std::_Exit(3);
        uint8_t x;
        if (status_of([&] { guarded_copy(&x, second.data() + 9000, 1); }) != A2PACK_E_CORRUPT)
          std::_Exit(4);
        const char caught[] = "guard caught it; ";
        (void)!::write(2, caught, sizeof caught - 1);
        ::raise(SIGBUS);  // not the library's: the later handler, then the default action
        std::_Exit(0);
      },
      testing::KilledBySignal(SIGBUS), "guard caught it; later handler ran");
}

TEST(MappedGuardDeathTest, AHandlerThatReturnsFromAFaultDoesNotLoopForever) {
  TempDir dir;
  const std::string a = make_file(dir, "a.bin"), other = make_file(dir, "other.bin");
  EXPECT_EXIT(
      {
        MappedFile first(a);
        install(returning_handler);
        MappedFile second(a);  // chains to returning_handler
        int fd = ::open(other.c_str(), O_RDONLY);
        auto* p = static_cast<const volatile uint8_t*>(
            ::mmap(nullptr, kFileBytes, PROT_READ, MAP_SHARED, fd, 0));
        if (::truncate(other.c_str(), 0) != 0) std::_Exit(3);
        (void)p[10000];  // faults again at the same address: the default action
        std::_Exit(0);
      },
      testing::KilledBySignal(SIGBUS), "");
}

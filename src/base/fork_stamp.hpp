// Telling a forked child from the process that made an object.
#pragma once

#include <cstdint>

namespace a2pack {

// Remembers the process it was made in: forked() is true in a child forked
// after that. Objects that own threads (a child has none of them) or
// temporary files (which a child must not delete or rename) check it. One
// relaxed atomic load: a pthread_atfork handler counts forks, so no getpid()
// system call on hot paths.
class ForkStamp {
 public:
  ForkStamp();
  bool forked() const;

 private:
  uint64_t generation_;
};

}  // namespace a2pack

// Temporaries that killed writers leave behind.
//
// Every atomic writer (AtomicFile) writes "<out>.tmp-<pid>-<n>" beside its
// output, holds an flock on it while it lives, and renames it over <out> at
// commit. A writer killed before that (SIGKILL, power cut) leaves the
// temporary. These functions remove such files - and only them: a regular
// file whose name is exactly "<name>.tmp-<digits>-<digits>", whose process
// <pid> no longer exists, and on which no process holds the lock (so a live
// writer in another PID namespace, or a forked child still holding it, keeps
// its file). Writers of packs and bags call remove_stale_temps() on their
// output when they open it, as `dataset build` does for its folders.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace a2pack {

// Whether process `pid` exists (EPERM counts as existing).
bool process_alive(long pid);

// The pid of a writer temporary named `name` ("<base>.tmp-<pid>-<n>"), and
// `base` set to the output's name; 0 when `name` is not one.
long temp_owner(std::string_view name, std::string* base = nullptr);

// Remove the stale temporaries of output `out` (see above). Returns the
// removed paths. Errors listing the folder or removing a file are ignored
// (cleaning is best effort; the writer goes on either way).
std::vector<std::string> remove_stale_temps(const std::string& out);

// The same for every output in folder `dir`.
std::vector<std::string> remove_stale_temps_in(const std::string& dir);

}  // namespace a2pack

// Whole files written by the CLI itself (run files of `extract` and of
// `bag convert` into a folder), and the CLI's stdout.
//
// The library's writers go through AtomicFile (src/base/file_io.hpp); the
// CLI is a client of the public C API only and cannot link it, so this is
// the same discipline for the one case the CLI needs, a file written whole:
// a new temporary "<path>.tmp-<pid>-<n>" beside it (the name `a2pack clean`
// knows), every write and the close checked, then a rename into place.
#pragma once

#include <cstddef>
#include <string>

namespace a2cli {

// Write `len` bytes to `path`. The temporary is created with O_EXCL |
// O_NOFOLLOW, so a name already taken (a planted link included) is never
// opened: the next n is tried instead. The rename replaces whatever is at
// `path` (a link there is replaced, never followed). With `durable` the file
// is fsynced before the rename and its folder after it; without, call
// sync_folder() once all files of a folder are written. On any failure the
// temporary is removed, nothing is installed, and CliError (exit status 3)
// names `path`, the step that failed, the temporary and the system's reason
// (e.g. "No space left on device").
void write_file_atomic(const std::string& path, const void* data, size_t len, bool durable = true);

// Make every file written into `dir` durable (syncfs of its filesystem,
// then an fsync of the folder), reporting a write the kernel could not
// complete (CliError, exit status 3).
void sync_folder(const std::string& dir);

// fwrite to stdout, all of it or CliError (exit status 3) naming stdout and
// the reason: a full disk or a closed pipe stops the command at once.
void write_stdout(const void* data, size_t len);

// Flush stdout at the end of a command: 0, or 3 after printing why on
// stderr (output that never reached its file is a failed command).
int finish_stdout();

}  // namespace a2cli

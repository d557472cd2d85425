// The NPY container of steps.npy: the header numpy's np.save writes for the
// step dtype, and a strict reader for headers written by numpy, by upstream's
// npyz writer, or by a2pack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/file_io.hpp"

namespace a2pack::dataset {

// The dtype descr as numpy prints it (for messages and the manifest).
extern const char* const kStepDescr;

// The header bytes numpy's np.save writes for an (rows,) array of the step
// dtype: NPY 1.0, the dict with numpy's spare room for the shape to grow, and
// space padding so the data starts on a 64-byte boundary. Its length does not
// depend on `rows` (256 bytes), so a writer can patch the final count in place.
std::string npy_header(uint64_t rows);

// Length of npy_header(): the data offset of files a2pack writes.
size_t npy_header_size();

struct NpyInfo {
  uint64_t rows = 0;         // shape[0]
  uint64_t data_offset = 0;  // where row 0 starts
  int version = 1;           // NPY major version (1, 2 or 3)
  // Bytes past the declared rows: always 0 unless the caller allowed a tail.
  uint64_t tail_bytes = 0;
};

// Parse and check the header at the start of a file of `file_size` bytes;
// `head` holds the first `head_len` bytes of the file (at least the whole
// header: call npy_header_length() first). Refuses, naming `path`: a bad
// magic, an unknown version, a dtype other than the step dtype (any field,
// type, byte order or padding), Fortran order, a shape that is not (N,), and a
// file whose size is not data_offset + 32 * N (truncated or with extra bytes).
// With `allow_tail`, bytes past the N rows are counted in tail_bytes instead:
// for a steps.npy an append of a2pack's is extending in place, whose journal
// claims what lies past the committed rows (dataset/journal.hpp).
NpyInfo parse_npy_header(const uint8_t* head, size_t head_len, uint64_t file_size,
                         const std::string& path, bool allow_tail = false);

// Total header length (magic to the end of the padded dict) from the first
// 12 bytes; checks magic and version. Refuses headers over 1 MiB.
uint64_t npy_header_length(const uint8_t* first, size_t len, uint64_t file_size,
                           const std::string& path);

// Read and check the header of an open steps.npy (parse_npy_header's checks).
NpyInfo read_npy_info(const ReadFd& f, bool allow_tail = false);

}  // namespace a2pack::dataset

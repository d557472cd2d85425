// Helpers shared by the packfile subcommands (pack, validate, stats,
// to-jsonl, extract, inspect --packfile): handle ownership and small
// conversions. Public C API only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "a2pack.h"

namespace a2cli {

struct PackCloser {
  void operator()(a2pack_pack* p) const { a2pack_pack_close(p); }
};
using PackPtr = std::unique_ptr<a2pack_pack, PackCloser>;

// Open a pack (memory-mapped, entry CRCs checked) or throw CliError.
PackPtr open_pack(const std::string& path);

// "0,5,42" or "3-7,9": entry indices in the given order. Throws CliError.
std::vector<uint64_t> parse_indices(const std::string& text);

}  // namespace a2cli

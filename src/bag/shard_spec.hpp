// File specs as bagz and Säckli accept them (docs/bag.md):
//   "dir/name.bagz"                      one file
//   "dir/name@4.bagz"                    name-00000-of-00004.bagz ... 00003
//   "dir/name@*.bagz"                    the same, N found from shard 0 on disk
//   "a@2.bag,b.bag"                      several specs, in order
// A leading "posix:" (bagz's local-filesystem prefix, also "/posix:") is
// accepted and dropped per element (base/path_prefix.hpp).
#pragma once

#include <string>
#include <vector>

namespace a2pack::bag {

// Expand a spec into the shard paths, in order. `@*` looks at the folder;
// nothing else touches the filesystem. Throws INVALID_ARGUMENT for a malformed
// spec and NOT_FOUND when `@*` finds no shard 0.
std::vector<std::string> expand_spec(const std::string& spec);

// "name-00002-of-00004.bagz" for ("name", 2, 4, ".bagz") — the %s-%05d-of-%05d%s rule.
std::string shard_name(const std::string& base, uint64_t index, uint64_t count,
                       const std::string& suffix);

}  // namespace a2pack::bag

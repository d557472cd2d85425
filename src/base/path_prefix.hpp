// The one parser of the prefixes a path may carry (shared by every
// capability, so a path means the same thing everywhere):
//   "posix:dir/f.bag", "fs:dir/f.bag"   a local file (bagz's and Säckli's prefixes)
//   "s3://bucket/key", "gs://bucket/key"  an object in Amazon S3 / Google Cloud Storage
//   "/s3://bucket/key", "/gs://bucket/key", "s3:/bucket/key", "/gs:/bucket/key"
//                                       the same objects as pathlib spells them
//                                       (it folds "//" into "/" and keeps a leading "/")
//   anything else                       a local path, unchanged
// Nothing here touches the filesystem or the network.
#pragma once

#include <string>
#include <string_view>

namespace a2pack {

enum class PathScheme { local, s3, gs };

struct ParsedPath {
  PathScheme scheme = PathScheme::local;
  std::string local;   // scheme local: the path with its prefix removed
  std::string bucket;  // s3 / gs
  std::string key;     // s3 / gs: the object name (may be empty: a bucket or prefix)
  bool remote() const { return scheme != PathScheme::local; }
  // "s3://bucket/key" / "gs://bucket/key" / the local path.
  std::string url() const;
};

// Parse a path. INVALID_ARGUMENT for "s3://" or "gs://" without a bucket.
ParsedPath parse_path(std::string_view path);

// True for the object-storage forms above.
bool is_remote_path(std::string_view path);

// The local path of a local spelling (prefix removed); other paths unchanged.
std::string strip_local_prefix(std::string_view path);

}  // namespace a2pack

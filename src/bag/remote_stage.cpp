#include "bag/remote_stage.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "bag/format.hpp"
#include "base/error.hpp"
#include "base/file_io.hpp"
#include "base/path_prefix.hpp"
#include "storage/object_store.hpp"
#include "storage/options.hpp"

namespace a2pack::bag {
namespace {

void upload_file(const std::string& local, const std::string& url) {
  ReadFd in(local);
  const uint64_t size = in.size();
  auto out = storage::open_write(url);
  std::vector<uint8_t> buf(storage::settings().part_size);
  for (uint64_t off = 0; off < size;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
    in.pread_exact(buf.data(), n, off);
    out->write(buf.data(), n);
    off += n;
  }
  out->commit();
}

}  // namespace

RemoteStage::RemoteStage(const std::string& url) : url_(parse_path(url).url()) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/a2pack-upload-XXXXXX";
  if (!::mkdtemp(tmpl.data())) fail_errno("create staging folder", tmpl, errno);
  dir_ = tmpl;
  auto slash = url_.find_last_of('/');
  local_ = dir_ + "/" + url_.substr(slash + 1);
}

RemoteStage::~RemoteStage() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);  // only our private folder
}

void RemoteStage::upload(bool separate_limits) const {
  upload_file(local_, url_);
  if (separate_limits) upload_file(limits_path(local_), limits_path(url_));
}

}  // namespace a2pack::bag

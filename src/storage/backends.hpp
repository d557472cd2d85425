// The backends behind object_store.hpp (one file each).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/path_prefix.hpp"
#include "storage/object_store.hpp"

namespace a2pack::storage {

std::unique_ptr<ReadObject> local_open_read(const std::string& path);
std::unique_ptr<WriteObject> local_open_write(const std::string& path, bool durable);
std::vector<std::string> local_list(const std::string& prefix);
void local_remove(const std::string& path);

std::unique_ptr<ReadObject> s3_open_read(const ParsedPath& p);
std::unique_ptr<WriteObject> s3_open_write(const ParsedPath& p);
std::vector<std::string> s3_list(const ParsedPath& p);  // keys
void s3_remove(const ParsedPath& p);

std::unique_ptr<ReadObject> gcs_open_read(const ParsedPath& p);
std::unique_ptr<WriteObject> gcs_open_write(const ParsedPath& p);
std::vector<std::string> gcs_list(const ParsedPath& p);  // object names
void gcs_remove(const ParsedPath& p);

}  // namespace a2pack::storage

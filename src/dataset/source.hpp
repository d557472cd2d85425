// Where a build or append takes its runs from. The builder sees only a count
// and the payload bytes of run i, so a folder of .a2run2 files and a packfile
// (once the pack capability exposes a reader to this layer) feed the same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace a2pack::dataset {

// A view of one run's bytes: either into `scratch` or into memory the source
// owns for its whole life (a mapped packfile).
struct PayloadView {
  const uint8_t* data = nullptr;
  size_t len = 0;
};

class RunSource {
 public:
  virtual ~RunSource() = default;
  // Number of runs, in the order they become dataset runs.
  virtual size_t count() const = 0;
  // Payload of run i. Thread-safe: called concurrently with distinct scratch
  // buffers. Errors name the file (and entry).
  virtual PayloadView payload(size_t i, std::vector<uint8_t>& scratch) const = 0;
  // Names run i in error messages ("runs/run-000003.a2run2", "x.a2pack: entry 3").
  virtual std::string label(size_t i) const = 0;
  // The input as given, and its kind ("dir", "pack"), for the manifest.
  virtual std::string input() const = 0;
  virtual std::string kind() const = 0;
};

// Every *.a2run2 file under a folder (recursively), in byte order of their
// paths relative to it (the order upstream's builder uses). Fails with
// NOT_FOUND when the folder does not exist or holds no run files.
class DirSource final : public RunSource {
 public:
  explicit DirSource(const std::string& dir);
  size_t count() const override { return files_.size(); }
  PayloadView payload(size_t i, std::vector<uint8_t>& scratch) const override;
  std::string label(size_t i) const override { return files_[i]; }
  std::string input() const override { return dir_; }
  std::string kind() const override { return "dir"; }

 private:
  std::string dir_;
  std::vector<std::string> files_;
};

// Runs whose bytes a caller hands over: each in memory, or a range of a file
// (a run file, or a file of many runs end to end, as staged by distributed
// writers). `input` and `kind` are what the manifest records as the source.
// Memory entries are read in place and must outlive the build or append.
class BytesSource final : public RunSource {
 public:
  struct Entry {
    const uint8_t* data = nullptr;  // nullptr: read `length` bytes of `path` at `offset`
    std::string path;
    uint64_t offset = 0;
    uint64_t length = 0;
    std::string label;
  };
  BytesSource(std::vector<Entry> entries, std::string input, std::string kind);
  size_t count() const override { return entries_.size(); }
  PayloadView payload(size_t i, std::vector<uint8_t>& scratch) const override;
  std::string label(size_t i) const override { return entries_[i].label; }
  std::string input() const override { return input_; }
  std::string kind() const override { return kind_; }

 private:
  std::vector<Entry> entries_;
  std::string input_, kind_;
};

// Open the source for an --input argument: a folder, or a packfile (not yet
// wired: UNSUPPORTED with a message saying so).
std::unique_ptr<RunSource> open_source(const std::string& input);

}  // namespace a2pack::dataset

// A dataset built from hand-made runs and opened, for the tests of what
// reads datasets (the feed, its orders, the mixing sampler).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dataset/builder.hpp"
#include "dataset/dataset.hpp"
#include "test_dataset_util.hpp"

namespace dstest {

// Write `runs` to dir/runs, build dir/ds from them with one worker, open it.
inline std::shared_ptr<const a2pack::dataset::Dataset> built_dataset(
    const std::string& dir, const std::vector<Run>& runs) {
  write_runs(dir + "/runs", runs);
  a2pack::dataset::BuildOptions bo;
  bo.workers = 1;
  a2pack::dataset::DirSource src(dir + "/runs");
  a2pack::dataset::build(src, dir + "/ds", bo);
  a2pack::dataset::OpenOptions oo;
  oo.workers = 1;
  return a2pack::dataset::Dataset::open(dir + "/ds", oo);
}

}  // namespace dstest

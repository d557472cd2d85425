// Printing a decoded run (text and JSON), shared by `inspect` for run files
// and for packfile entries.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "a2pack.h"

namespace a2cli {

// Summary of a run as JSON: meta, counts, first/last boards.
nlohmann::json run_summary_json(const a2pack_run* run);

// The same as human-readable text with the boards drawn as grids.
std::string run_summary_text(const a2pack_run* run);

// "" when the run's meta.steps equals the steps it stores, else
// "meta.steps M but the run stores N steps". A v2 file stores the two apart
// and upstream never compares them, so commands warn (and fail under
// --strict) rather than refuse such a run.
std::string steps_mismatch(const a2pack_run* run);

}  // namespace a2cli

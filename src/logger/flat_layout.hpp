// Reading folders written in the single-folder layout (docs/formats.md, "The
// single-folder layout"): segments `NNNNN.seg.zst` directly in the run folder
// beside `streams/`, each a plain sequence of zstd frames, one record per frame
// (as the reference writer lays them out; several records in a frame are read
// too), with no frame header of ours. A record is the varint record of
// docs/logger.md and its epoch delta is taken from the same stream's previous
// record in the whole run (that writer keeps `last_tick_for_stream` across
// frames and segments), so these segments are decoded in order on one thread.
#pragma once

#include <string>

#include "logger/decoder.hpp"

namespace a2pack::logger {

// True when `dir` has no segments/ folder but holds NNNNN.seg.zst files.
bool flat_layout_dir(const std::string& dir);

// Decode the single-folder segments of `dir` into `d` (whose streams and
// problems the caller has filled from the sidecars): damage, gaps and limits
// become problems naming the file and offset, as for the frame layout.
void decode_flat_dir(const std::string& dir, const ScaleTable& scales, const DecodeOptions& opts,
                     Decoded& d);

}  // namespace a2pack::logger

// Numbers written exactly as serde_json writes them, so JSONL exports are
// byte-identical to upstream's: integers in decimal, f32 in the shortest
// form that reads back to the same f32, laid out as the `ryu` crate does
// ("1.0", "0.5", "1e-7", "1.5e20", "0.00012"), non-finite as `null`.
#pragma once

#include <cstdint>

namespace a2pack::pack::json {

// Each writer needs room for 24 bytes at p and returns the new end.
char* write_u64(char* p, uint64_t v);
char* write_f32(char* p, float f);

}  // namespace a2pack::pack::json

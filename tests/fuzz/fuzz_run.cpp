// Run-file decoder (.a2run2 v1 and v2) on arbitrary bytes. A decoded run must
// survive a v2 round trip unchanged; anything else must be a status with a
// message, never a crash or a read past the input.
#include <a2pack.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t len) {
  // Exact-size copy: a read one byte past the input trips AddressSanitizer.
  std::vector<uint8_t> buf(data, data + len);
  a2pack_run* run = nullptr;
  a2pack_status st = a2pack_run_decode(buf.data(), buf.size(), &run);
  fuzz::expect_message(st);
  uint8_t* up = nullptr;
  size_t up_len = 0;
  a2pack_status st_up = a2pack_run_upgrade_v1(buf.data(), buf.size(), &up, &up_len);
  fuzz::expect_message(st_up);
  // The two agree on validity, but for the one run v2 cannot carry (its
  // bytes would spell the v1 magic).
  const bool unwritable = st_up == A2PACK_E_INVALID_ARGUMENT &&
                          std::strstr(a2pack_last_error(), "v1 magic") != nullptr;
  if ((st == A2PACK_OK) != (st_up == A2PACK_OK) && !(st == A2PACK_OK && unwritable))
    std::abort();
  a2pack_free(up);
  if (st != A2PACK_OK) return 0;

  uint8_t* v2 = nullptr;
  size_t v2_len = 0;
  st = a2pack_run_encode(run, A2PACK_RUN_V2, 0, &v2, &v2_len);
  if (st == A2PACK_E_INVALID_ARGUMENT) {
    // The one refusal: a run whose v2 bytes would read back as v1.
    if (!std::strstr(a2pack_last_error(), "v1 magic")) std::abort();
    a2pack_run_close(run);
    return 0;
  }
  if (st != A2PACK_OK) std::abort();
  a2pack_run* again = nullptr;
  if (a2pack_run_decode(v2, v2_len, &again) != A2PACK_OK) std::abort();
  uint8_t* v2b = nullptr;
  size_t v2b_len = 0;
  if (a2pack_run_encode(again, A2PACK_RUN_V2, 0, &v2b, &v2b_len) != A2PACK_OK) std::abort();
  if (v2_len != v2b_len || std::memcmp(v2, v2b, v2_len) != 0) std::abort();
  if (a2pack_run_step_count(run) != a2pack_run_step_count(again) ||
      a2pack_run_final_board(run) != a2pack_run_final_board(again))
    std::abort();
  a2pack_free(v2);
  a2pack_free(v2b);
  a2pack_run_close(again);
  a2pack_run_close(run);
  return 0;
}

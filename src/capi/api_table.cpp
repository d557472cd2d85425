// a2pack_api(): every function in one table, so a host that dlopen()s the
// library needs a single dlsym.
#include "capi/api_table.hpp"
#include "capi/common.hpp"

// A capability's C API file overrides these with strong definitions; a build
// without that capability keeps the weak one, and the table says NULL.
namespace a2pack::capi {
__attribute__((weak)) const a2pack_pack_api* pack_api_table() { return nullptr; }
__attribute__((weak)) const a2pack_dataset_api* dataset_api_table() { return nullptr; }
__attribute__((weak)) const a2pack_bag_api* bag_api_table() { return nullptr; }
__attribute__((weak)) const a2pack_logger_api* logger_api_table() { return nullptr; }
__attribute__((weak)) const a2pack_arrow_api* arrow_api_table() { return nullptr; }
__attribute__((weak)) const a2pack_feed_api* feed_api_table() { return nullptr; }
__attribute__((weak)) const a2pack_shard_stream_api* shard_stream_api_table() { return nullptr; }
__attribute__((weak)) const a2pack_priorities_api* priorities_api_table() { return nullptr; }
}  // namespace a2pack::capi

namespace {

const a2pack_api_table kTable = {
    sizeof(a2pack_api_table),
    A2PACK_ABI_VERSION,
    a2pack_status_name,
    a2pack_last_error,
    a2pack_last_status,
    a2pack_clear_error,
    a2pack_version,
    a2pack_abi_version,
    a2pack_free,
    a2pack_board_score,
    a2pack_board_highest_tile,
    a2pack_board_apply_move,
    a2pack_board_legal_moves,
    a2pack_branches_normalise,
    a2pack_run_detect_kind,
    a2pack_run_decode,
    a2pack_run_load,
    a2pack_run_create,
    a2pack_run_close,
    a2pack_run_source_kind,
    a2pack_run_get_meta,
    a2pack_run_step_count,
    a2pack_run_final_board,
    a2pack_run_has_branches,
    a2pack_run_get_steps,
    a2pack_run_encode,
    a2pack_run_save,
    a2pack_run_upgrade_v1,
    a2pack_run_batch_decode,
    a2pack_run_batch_columns,
    a2pack_run_batch_close,
    a2pack_gen_options_init,
    a2pack_gen_run,
    a2pack_gen_dir,
    a2pack::capi::pack_api_table(),
    a2pack::capi::dataset_api_table(),
    a2pack::capi::bag_api_table(),
    a2pack::capi::logger_api_table(),
    a2pack_zstd_version,
    a2pack::capi::arrow_api_table(),
    a2pack_clean_temps,
    a2pack_run_batch_load,
    a2pack_run_batch_payload_bytes,
    a2pack::capi::feed_api_table(),
    a2pack_branches_normalise_f64,
    a2pack_stdrng_open,
    a2pack_stdrng_clone,
    a2pack_stdrng_close,
    a2pack_stdrng_shuffle,
    a2pack_board_spawn_stdrng,
    a2pack_board_make_move_stdrng,
    a2pack_expectimax_options_init,
    a2pack_expectimax_open,
    a2pack_expectimax_close,
    a2pack_expectimax_branch_evals,
    a2pack_expectimax_best_move,
    a2pack_expectimax_state_value,
    a2pack_expectimax_stats,
    a2pack_expectimax_reset_stats,
    a2pack_lz4_version,
    a2pack::capi::shard_stream_api_table(),
    a2pack_expectimax_stats_get,
    a2pack_expectimax_stats_reset,
    a2pack::capi::priorities_api_table(),
};

}  // namespace

A2PACK_EXPORT const a2pack_api_table* a2pack_api(uint32_t abi_version) {
  return abi_version == A2PACK_ABI_VERSION ? &kTable : nullptr;
}

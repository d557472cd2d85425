"""
    A2Pack

Julia interface to liba2pack: 2048 run files, packfiles, step datasets, Bagz
record files and the sparse-vector data logger, over the library's C ABI.

The library is found at load time: `ENV["A2PACK_LIBRARY"]`, else pkg-config's
`a2pack` install (`libdir`), else the repository's `build/liba2pack.so`; it is
opened by absolute path. Every C call goes through the generated
[`LibA2Pack`](@ref) module; the files included below add handles with finalizers, Julia
collections (1-based) and [`A2PackError`](@ref).
"""
module A2Pack

include("LibA2Pack.jl")
import .LibA2Pack
const L = LibA2Pack

export A2PackError, Run, RunBatch, Pack, PackWriter, BagReader, BagWriter, BagBatch,
       Dataset, Sampler, Logger, LogData, Step, StepRow,
       load_run, decode_run, detect_kind, encode, save, upgrade_v1, meta, boards, moves,
       final_board, has_branches, source_kind, columns, payload_bytes, gen_run, gen_dir,
       pack_dir, entry, read_bytes, slice, stats, validate, to_jsonl, permutation, batches,
       add!, finish!, commit!, read_batch, records, build_dataset, rows, gather!,
       gather_columns!, select_steps, select_runs, set_epoch!,
       register_stream, record, decode_log, problems, log_summary, library_path,
       board_score, highest_tile, apply_move, legal_moves, branches_normalise

# One file per concern, included in this order: later files use the types
# and helpers of earlier ones.
include("library.jl")
include("errors.jl")
include("handles.jl")
include("board.jl")
include("runs.jl")
include("gen.jl")
include("packs.jl")
include("bags.jl")
include("datasets.jl")
include("logger.jl")

end # module A2Pack

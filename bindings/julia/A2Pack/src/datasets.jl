# Step datasets (steps.npy + metadata.db): building, gathering rows, SQL selection, samplers.

"""
    Dataset(dir; mmap=false, verify_crc=true, workers=0)

A step dataset: `length` rows, `ds[i]` a [`StepRow`](@ref) (1-based, ranges
too), iteration; `rows(ds)` the 32 × N bytes (a view), `gather!` batches into
preallocated arrays, `select_steps` / `select_runs` SQL filters.
"""
mutable struct Dataset <: Handle
    ptr::Ptr{L.a2pack_dataset}
    keep::Any  # what this handle's memory depends on, kept alive with it
    Dataset(p::Ptr{L.a2pack_dataset}, keep=nothing) = finalizer(_finalize, new(p, keep))
end
_release(::Dataset, p) = L.a2pack_dataset_close(p)

"One decoded 32-byte row of steps.npy."
struct StepRow
    board::UInt64
    move::UInt8
    ev_legal::UInt8
    ev_values::NTuple{4,Float32}
    run_id::UInt32
    step_index::UInt16
end

function Dataset(dir::AbstractString; mmap::Bool=false, verify_crc::Bool=true, workers::Integer=0,
                 allow_extra_files::Bool=false)
    opts = _options(L.a2pack_dataset_open_options, L.a2pack_dataset_open_options_init,
                    :mmap => Int32(mmap), :verify_crc => Int32(verify_crc), :workers => workers,
                    :allow_extra_files => Int32(allow_extra_files))
    out = Ref{Ptr{L.a2pack_dataset}}(C_NULL)
    check(L.a2pack_dataset_open(_cstr(dir), opts, out))
    Dataset(out[])
end

function _info(ds::Dataset)
    out = _out(L.a2pack_dataset_info)
    check(L.a2pack_dataset_get_info(ds, out))
    out[]
end

"""Build a dataset in `out_dir` from a folder of runs or a packfile; returns counts.
With `append=true`, add the runs to the dataset in `out_dir` instead: steps.npy is
extended in place (the new rows, its header and the new runs are written), or, with
`copy_steps=true`, rewritten as a new file (`steps_copied` in the result says which).
Runs the dataset already holds, or that repeat another run of the input (the same
content digest, docs/dataset.md "Run digests"), are an error naming them that changes
nothing, unless `allow_duplicates=true` (`runs_duplicated` in the result counts them)."""
function build_dataset(input::AbstractString, out_dir::AbstractString; workers::Integer=0,
                       allow_missing_branches::Bool=false, overwrite::Bool=false, append::Bool=false,
                       copy_steps::Bool=false, allow_duplicates::Bool=false)
    opts = _options(L.a2pack_dataset_build_options, L.a2pack_dataset_build_options_init,
                    :workers => workers, :allow_missing_branches => Int32(allow_missing_branches),
                    :overwrite => Int32(overwrite), :copy_steps => Int32(copy_steps),
                    :allow_duplicates => Int32(allow_duplicates))
    res = _out(L.a2pack_dataset_build_result)
    if append
        check(L.a2pack_dataset_append(_cstr(out_dir), _cstr(input), opts, res))
    else
        check(L.a2pack_dataset_build(_cstr(input), _cstr(out_dir), opts, res))
    end
    r = res[]
    (runs_added=Int(r.runs_added), rows_added=Int(r.rows_added), total_runs=Int(r.total_runs),
     total_rows=Int(r.total_rows), steps_copied=r.steps_copied != 0,
     runs_duplicated=Int(r.runs_duplicated))
end

Base.length(ds::Dataset) = Int(_info(ds).rows)
"The committed rows as a 32 × N byte matrix viewing the dataset's memory."
function rows(ds::Dataset)
    i = _info(ds)
    LibArray(Ptr{UInt8}(i.data), (Int(L.A2PACK_DATASET_ROW_BYTES), Int(i.rows)), ds)
end

function _row(p::Ptr{UInt8})
    ld(T, off) = unsafe_load(Ptr{T}(p + off))  # rows are packed: unaligned loads
    StepRow(ld(UInt64, 0), ld(UInt8, 8), ld(UInt8, 9),
            (ld(Float32, 10), ld(Float32, 14), ld(Float32, 18), ld(Float32, 22)),
            ld(UInt32, 26), ld(UInt16, 30))
end
StepRow(bytes::AbstractVector{UInt8}) = (length(bytes) == 32 || throw(ArgumentError("a row is 32 bytes"));
                                        b = Vector{UInt8}(bytes); GC.@preserve b _row(pointer(b)))

function Base.getindex(ds::Dataset, i::Integer)
    info = _info(ds)
    1 <= i <= info.rows || throw(BoundsError(ds, i))
    GC.@preserve ds _row(Ptr{UInt8}(info.data) + (i - 1) * 32)
end
Base.getindex(ds::Dataset, idx::AbstractVector{<:Integer}) =
    (m = gather!(Matrix{UInt8}(undef, 32, length(idx)), ds, idx); [StepRow(view(m, :, k)) for k in 1:length(idx)])
Base.firstindex(::Dataset) = 1
Base.lastindex(ds::Dataset) = length(ds)
Base.eltype(::Type{Dataset}) = StepRow
Base.iterate(ds::Dataset, i::Int=1) = i > length(ds) ? nothing : (ds[i], i + 1)
Base.show(io::IO, ds::Dataset) = print(io, "A2Pack.Dataset(", isopen(ds) ? "$(length(ds)) rows" : "closed", ")")

_idx0(ds::Dataset, idx) = (n = length(ds); Int64[Int64(_index0(n, i)) for i in idx])

"""
    gather!(out::AbstractMatrix{UInt8}, ds, idx; workers=0) -> out

Copy rows `idx` (1-based) into the preallocated 32 × length(idx) matrix `out`
(one C call; no allocation besides the 0-based index list).
"""
function gather!(out::Matrix{UInt8}, ds::Dataset,
                 idx::AbstractVector{<:Integer}; workers::Integer=0)
    size(out) == (32, length(idx)) ||
        throw(DimensionMismatch("out is $(size(out)), needs (32, $(length(idx)))"))
    ids = _idx0(ds, idx)
    GC.@preserve out check(L.a2pack_dataset_gather(ds, ids, length(ids), pointer(out), workers))
    out
end

"""
    gather_columns!(ds, idx; boards=nothing, moves=nothing, exponents=nothing, legal=nothing,
                    legal_mask=nothing, ev_values=nothing, run_ids=nothing, step_indices=nothing)

Gather rows `idx` straight into the training arrays given (each preallocated:
`boards::Vector{UInt64}`, `moves::Vector{UInt8}`, `exponents` 16 × n UInt8,
`legal` 4 × n UInt8, `legal_mask::Vector{UInt8}`, `ev_values` 4 × n Float32,
`run_ids::Vector{UInt32}`, `step_indices::Vector{UInt16}`); `nothing` skips one.
"""
function gather_columns!(ds::Dataset, idx::AbstractVector{<:Integer}; workers::Integer=0,
                         boards=nothing, moves=nothing, exponents=nothing, legal=nothing,
                         legal_mask=nothing, ev_values=nothing, run_ids=nothing, step_indices=nothing)
    n = length(idx)
    want(a, T, len, name) = a === nothing ? Ptr{T}(C_NULL) :
        (a isa Array{T} && length(a) == len) ? pointer(a) :
        throw(ArgumentError("$name must be an Array{$T} of $len elements"))
    ids = _idx0(ds, idx)
    GC.@preserve boards moves exponents legal legal_mask ev_values run_ids step_indices begin
        cols = Ref(_make(L.a2pack_dataset_columns;
            exponents=want(exponents, UInt8, 16n, "exponents"), boards=want(boards, UInt64, n, "boards"),
            moves=want(moves, UInt8, n, "moves"), legal=want(legal, UInt8, 4n, "legal"),
            legal_mask=want(legal_mask, UInt8, n, "legal_mask"),
            ev_values=want(ev_values, Float32, 4n, "ev_values"),
            run_ids=want(run_ids, UInt32, n, "run_ids"),
            step_indices=want(step_indices, UInt16, n, "step_indices")))
        check(L.a2pack_dataset_gather_columns(ds, ids, n, cols, workers))
    end
    nothing
end

# SQL parameters of a filter: integers, floats, strings, nothing.
function _params(args)
    texts = [a isa AbstractString ? Vector{UInt8}(codeunits(a)) : UInt8[] for a in args]
    ps = map(enumerate(args)) do (k, a)
        a === nothing ? _make(L.a2pack_sql_param; type=L.A2PACK_SQL_NULL) :
        a isa Integer ? _make(L.a2pack_sql_param; type=L.A2PACK_SQL_INTEGER, integer=a) :
        a isa Real ? _make(L.a2pack_sql_param; type=L.A2PACK_SQL_REAL, real=a) :
        a isa AbstractString ? _make(L.a2pack_sql_param; type=L.A2PACK_SQL_TEXT,
                                     text=pointer(texts[k]), text_len=length(texts[k])) :
        throw(ArgumentError("SQL parameter $k: $(typeof(a)) is not an integer, real, string or nothing"))
    end
    L.a2pack_sql_param[ps...], texts
end

"Rows (1-based step numbers, ascending) of the runs matching the SQL condition `cond` on the runs table (metadata.db; `?` bound to `params`; an empty condition selects every run)."
function select_steps(ds::Dataset, cond::AbstractString, params...)
    ps, texts = _params(params)
    out = Ref{Ptr{Int64}}(C_NULL); n = Ref{Csize_t}(0)
    GC.@preserve texts check(L.a2pack_dataset_select(ds, _cstr(cond), ps, length(ps), out, n))
    _take_owned(out[], n[]) .+ 1
end
"Run ids (as stored, 0-based) of the committed runs matching `cond`."
function select_runs(ds::Dataset, cond::AbstractString, params...)
    ps, texts = _params(params)
    out = Ref{Ptr{Int64}}(C_NULL); n = Ref{Csize_t}(0)
    GC.@preserve texts check(L.a2pack_dataset_select_runs(ds, _cstr(cond), ps, length(ps), out, n))
    _take_owned(out[], n[])
end
"Dataset statistics as the library's JSON text."
stats(ds::Dataset; workers::Integer=0) =
    (out = Ref{Ptr{Cchar}}(C_NULL); check(L.a2pack_dataset_stats_json(ds, workers, out)); _take_string(out[]))

"""
    Sampler(n_or_indices; seed=0, batch_size=256, drop_last=false)

Deterministic epoch batches over rows 1:n (or the given 1-based rows):
`set_epoch!(s, e)`, `length(s)` batches, `s[b]` the rows of batch b.
"""
mutable struct Sampler <: Handle
    ptr::Ptr{L.a2pack_dataset_sampler}
    keep::Any  # what this handle's memory depends on, kept alive with it
    Sampler(p::Ptr{L.a2pack_dataset_sampler}, keep=nothing) = finalizer(_finalize, new(p, keep))
end
_release(::Sampler, p) = L.a2pack_dataset_sampler_close(p)
function Sampler(rows::Union{Integer,AbstractVector{<:Integer}}; seed::Integer=0,
                 batch_size::Integer=256, drop_last::Bool=false)
    idx = rows isa Integer ? Ptr{Int64}(C_NULL) : Int64[i - 1 for i in rows]
    n = rows isa Integer ? rows : length(rows)
    out = Ref{Ptr{L.a2pack_dataset_sampler}}(C_NULL)
    GC.@preserve idx check(L.a2pack_dataset_sampler_open(idx, n, seed, batch_size, Int32(drop_last), out))
    Sampler(out[], Int(batch_size))  # keep: the room a batch needs
end
set_epoch!(s::Sampler, epoch::Integer) = (check(L.a2pack_dataset_sampler_set_epoch(s, epoch)); s)
Base.length(s::Sampler) = Int(L.a2pack_dataset_sampler_batch_count(_ptr(s)))
function Base.getindex(s::Sampler, b::Integer)
    1 <= b <= length(s) || throw(BoundsError(s, b))
    out = Vector{Int64}(undef, s.keep::Int); n = Ref{Csize_t}(0)
    check(L.a2pack_dataset_sampler_batch(s, b - 1, out, n))
    Int.(resize!(out, Int(n[]))) .+ 1
end
Base.iterate(s::Sampler, b::Int=1) = b > length(s) ? nothing : (s[b], b + 1)
Base.eltype(::Type{Sampler}) = Vector{Int}

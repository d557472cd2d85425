# Packfiles (A2PACK): reading entries, writing, validating.

"""
    Pack(path; mmap=true, verify_crc=true)

A packfile: a collection of runs. `length`, `p[i]` (1-based, a decoded
[`Run`](@ref); ranges give vectors), iteration; `read_bytes(p, i)`,
`slice(p, i)` (a view of the stored bytes), `entry`, `stats`, `validate`,
`to_jsonl`, `batches`.
"""
mutable struct Pack <: Handle
    ptr::Ptr{L.a2pack_pack}
    keep::Any  # what this handle's memory depends on, kept alive with it
    Pack(p::Ptr{L.a2pack_pack}, keep=nothing) = finalizer(_finalize, new(p, keep))
end
_release(::Pack, p) = L.a2pack_pack_close(p)

function Pack(path::AbstractString; mmap::Bool=true, verify_crc::Bool=true)
    opts = _options(L.a2pack_pack_options, L.a2pack_pack_options_init,
                    :use_mmap => Int32(mmap), :verify_crc => Int32(verify_crc))
    out = Ref{Ptr{L.a2pack_pack}}(C_NULL)
    check(L.a2pack_pack_open(_cstr(path), opts, out))
    Pack(out[])
end

Base.length(p::Pack) = Int(L.a2pack_pack_len(_ptr(p)))
Base.firstindex(::Pack) = 1
Base.lastindex(p::Pack) = length(p)
Base.eltype(::Type{Pack}) = Run
Base.iterate(p::Pack, i::Int=1) = i > length(p) ? nothing : (p[i], i + 1)
Base.getindex(p::Pack, i::Integer) =
    _new_run(out -> L.a2pack_pack_decode(p, _index0(length(p), i), 0, out))
function Base.getindex(p::Pack, idx::AbstractVector{<:Integer})
    n = length(p)
    ids = UInt64[_index0(n, i) for i in idx]
    runs = fill(Ptr{L.a2pack_run}(C_NULL), length(ids))
    check(L.a2pack_pack_decode_runs(p, ids, length(ids), 0, 0, runs))
    [Run(q) for q in runs]
end
Base.show(io::IO, p::Pack) = print(io, "A2Pack.Pack(", isopen(p) ? "$(length(p)) runs" : "closed", ")")

"""
Index entry `i` (1-based) as stored: offset, length, kind, compressed,
compression (`:none`, `:zstd`, `:lz4`, or the flags value), crc32c, raw_length.
"""
function entry(p::Pack, i::Integer)
    out = _out(L.a2pack_pack_entry)
    check(L.a2pack_pack_entry_info(p, _index0(length(p), i), out))
    e = out[]
    compression = e.flags == L.A2PACK_PACK_ENTRY_STORED ? :none :
                  e.flags == L.A2PACK_PACK_ENTRY_ZSTD ? :zstd :
                  e.flags == L.A2PACK_PACK_ENTRY_LZ4 ? :lz4 : Int(e.flags)
    (offset=e.offset, length=e.length, kind=Int(e.kind),
     compressed=e.flags != L.A2PACK_PACK_ENTRY_STORED, compression=compression, crc32c=e.crc32c,
     raw_length=e.raw_length)
end

"Entry `i`'s run-file bytes exactly as packed (a fresh Vector)."
function read_bytes(p::Pack, i::Integer; verify::Bool=true)
    data = Ref{Ptr{UInt8}}(C_NULL); len = Ref{Csize_t}(0)
    check(L.a2pack_pack_read(p, _index0(length(p), i), verify ? 0 : L.A2PACK_PACK_NO_VERIFY, data, len))
    _take_owned(data[], len[])
end

"Zero-copy view of entry `i`'s stored bytes (compressed for zstd entries); keeps `p` alive."
function slice(p::Pack, i::Integer; verify::Bool=true)
    data = Ref{Ptr{UInt8}}(C_NULL); len = Ref{Csize_t}(0)
    check(L.a2pack_pack_get_slice(p, _index0(length(p), i), verify ? 0 : L.A2PACK_PACK_NO_VERIFY,
                                  data, len))
    LibArray(data[], Int(len[]), p)
end

function stats(p::Pack; workers::Integer=0)
    out = _out(L.a2pack_pack_stats)
    check(L.a2pack_pack_stats_get(p, workers, out))
    s = out[]
    (count=Int(s.count), total_steps=Int(s.total_steps), min_len=Int(s.min_len),
     max_len=Int(s.max_len), mean_len=s.mean_len, p50=Int(s.p50), p90=Int(s.p90), p99=Int(s.p99),
     from_block=s.from_block != 0)
end

"Check the pack; `full=true` decodes every entry. Throws A2PackError naming the problem."
validate(p::Pack; full::Bool=false, workers::Integer=0) =
    check(L.a2pack_pack_validate(p, Int32(full), workers, C_NULL, C_NULL))

"Write every run as JSONL (`mode` :runs or :steps); returns the bytes written."
function to_jsonl(p::Pack, path::AbstractString; mode::Symbol=:runs, workers::Integer=0)
    m = mode === :runs ? L.A2PACK_PACK_JSONL_RUNS : mode === :steps ? L.A2PACK_PACK_JSONL_STEPS :
        throw(ArgumentError("mode must be :runs or :steps"))
    n = Ref{UInt64}(0)
    check(L.a2pack_pack_to_jsonl(p, _cstr(path), m, workers, 0, C_NULL, C_NULL, n))
    Int(n[])
end

"An epoch's order of the entries, 1-based."
function permutation(p::Pack; shuffle::Bool=false, seed::Integer=0)
    out = Vector{UInt64}(undef, length(p))
    check(L.a2pack_pack_permutation(p, Int32(shuffle), seed, out, length(out)))
    Int.(out) .+ 1
end

"""
    batches(p; batch_size=256, shuffle=false, seed=0, workers=0)

Iterate an epoch as `(batch::RunBatch, indices::Vector{Int})` (1-based entry
numbers); each batch is closed when the iteration moves on.
"""
batches(p::Pack; batch_size::Integer=256, shuffle::Bool=false, seed::Integer=0, workers::Integer=0) =
    PackBatches(p, _options(L.a2pack_pack_iter_options, L.a2pack_pack_iter_options_init,
                            :batch_size => batch_size, :shuffle => Int32(shuffle), :seed => seed,
                            :workers => workers))

struct PackBatches
    pack::Pack
    opts::Base.RefValue{L.a2pack_pack_iter_options}
end
"An epoch in progress (see `batches`)."
mutable struct PackIter <: Handle
    ptr::Ptr{L.a2pack_pack_iter}
    keep::Any  # what this handle's memory depends on, kept alive with it
    PackIter(p::Ptr{L.a2pack_pack_iter}, keep=nothing) = finalizer(_finalize, new(p, keep))
end
_release(::PackIter, p) = L.a2pack_pack_iter_close(p)
Base.IteratorSize(::Type{PackBatches}) = Base.SizeUnknown()
Base.eltype(::Type{PackBatches}) = Tuple{RunBatch,Vector{Int}}
function Base.iterate(pb::PackBatches)
    out = Ref{Ptr{L.a2pack_pack_iter}}(C_NULL)
    check(L.a2pack_pack_iter_open(pb.pack, pb.opts, out))
    iterate(pb, (PackIter(out[], pb.pack), nothing))
end
function Base.iterate(pb::PackBatches, state)
    it, prev = state
    prev === nothing || close(prev)
    b = Ref{Ptr{L.a2pack_run_batch}}(C_NULL); idx = Ref{Ptr{UInt64}}(C_NULL); n = Ref{Csize_t}(0)
    check(L.a2pack_pack_iter_next(it, b, idx, n))
    if b[] == C_NULL
        close(it)
        return nothing
    end
    batch = RunBatch(b[])
    ids = Int.(unsafe_wrap(Array, idx[], Int(n[]))) .+ 1
    ((batch, ids), (it, batch))
end

"""
    pack_dir(input_dir, output; compression=:none, zstd_level=3, lz4_level=0, workers=0, skip_bad=false)

Pack every *.a2run2 under `input_dir` into `output`; returns a summary.
`compression`: `:none`, `:zstd` (smaller) or `:lz4` (faster to read;
`lz4_level` 0 = fast, negative = faster, 3..12 = LZ4 HC).
"""
function pack_dir(input_dir::AbstractString, output::AbstractString; kw...)
    opts = _writer_options(; kw...)
    out = _out(L.a2pack_pack_build_summary)
    check(L.a2pack_pack_dir(_cstr(input_dir), _cstr(output), opts, C_NULL, C_NULL, out))
    _summary(out[])
end

function _writer_options(; compression::Symbol=:none, zstd_level::Integer=3, lz4_level::Integer=0,
                         workers::Integer=0, skip_bad::Bool=false, align::Integer=4096,
                         entry_crc::Bool=true)
    c = compression === :none ? L.A2PACK_PACK_COMPRESS_NONE :
        compression === :zstd ? L.A2PACK_PACK_COMPRESS_ZSTD :
        compression === :lz4 ? L.A2PACK_PACK_COMPRESS_LZ4 :
        throw(ArgumentError("compression must be :none, :zstd or :lz4"))
    _options(L.a2pack_pack_writer_options, L.a2pack_pack_writer_options_init,
             :compression => c, :zstd_level => zstd_level, :lz4_level => lz4_level, :workers => workers,
             :skip_bad => Int32(skip_bad), :align => align, :entry_crc => Int32(entry_crc))
end
_summary(s::L.a2pack_pack_build_summary) =
    (entries=Int(s.entries), skipped=Int(s.skipped), input_bytes=Int(s.input_bytes),
     stored_bytes=Int(s.stored_bytes), compressed_entries=Int(s.compressed_entries),
     file_bytes=Int(s.file_bytes))

"""
    PackWriter(path; compression=:none, ...)

Builds a pack: `add!(w, bytes)` / `add!(w, path)`, then `finish!(w)`.
Nothing appears under `path` before finish; closing unfinished abandons it.
`open(PackWriter, path) do w ... end` finishes when the block returns.
"""
mutable struct PackWriter <: Handle
    ptr::Ptr{L.a2pack_pack_writer}
    keep::Any  # what this handle's memory depends on, kept alive with it
    PackWriter(p::Ptr{L.a2pack_pack_writer}, keep=nothing) = finalizer(_finalize, new(p, keep))
end
_release(::PackWriter, p) = L.a2pack_pack_writer_close(p)
function PackWriter(path::AbstractString; kw...)
    out = Ref{Ptr{L.a2pack_pack_writer}}(C_NULL)
    check(L.a2pack_pack_writer_open(_cstr(path), _writer_options(; kw...), out))
    PackWriter(out[])
end
add!(w::PackWriter, bytes::AbstractVector{UInt8}) =
    GC.@preserve bytes check(L.a2pack_pack_writer_add(w, bytes, length(bytes)))
add!(w::PackWriter, path::AbstractString) = check(L.a2pack_pack_writer_add_file(w, _cstr(path)))
Base.length(w::PackWriter) = Int(L.a2pack_pack_writer_count(_ptr(w)))
function finish!(w::PackWriter)
    out = _out(L.a2pack_pack_build_summary)
    check(L.a2pack_pack_writer_finish(w, out))
    _summary(out[])
end
function Base.open(f::Function, ::Type{PackWriter}, path::AbstractString; kw...)
    w = PackWriter(path; kw...)
    try
        r = f(w)
        finish!(w)
        return r
    finally
        close(w)
    end
end

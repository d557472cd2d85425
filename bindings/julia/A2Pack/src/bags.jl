# Bagz/Säckli record files: reading records in batches, writing.

"""
    BagReader(spec; compression=:auto, separate_limits=false, interleaved=false, parallelism=0)

Records of a Bagz file spec ("f.bagz", "name@N.bagz", ...): `length`,
`r[i]` (1-based; a `Vector{UInt8}`), `r[2:5]`, iteration, `read_batch`.
"""
mutable struct BagReader <: Handle
    ptr::Ptr{L.a2pack_bag_reader}
    keep::Any  # what this handle's memory depends on, kept alive with it
    BagReader(p::Ptr{L.a2pack_bag_reader}, keep=nothing) = finalizer(_finalize, new(p, keep))
end
_release(::BagReader, p) = L.a2pack_bag_reader_close(p)

_bag_compression(c::Symbol) = c === :auto ? L.A2PACK_BAG_COMPRESSION_AUTO :
    c === :none ? L.A2PACK_BAG_COMPRESSION_NONE : c === :zstd ? L.A2PACK_BAG_COMPRESSION_ZSTD :
    throw(ArgumentError("compression must be :auto, :none or :zstd"))

function BagReader(spec::AbstractString; compression::Symbol=:auto, separate_limits::Bool=false,
                   interleaved::Bool=false, parallelism::Integer=0)
    opts = _options(L.a2pack_bag_reader_options, L.a2pack_bag_reader_options_init,
                    :compression => _bag_compression(compression),
                    :limits_placement => separate_limits ? L.A2PACK_BAG_LIMITS_SEPARATE : L.A2PACK_BAG_LIMITS_TAIL,
                    :sharding => interleaved ? L.A2PACK_BAG_SHARDING_INTERLEAVED : L.A2PACK_BAG_SHARDING_CONCATENATED,
                    :max_parallelism => parallelism)
    out = Ref{Ptr{L.a2pack_bag_reader}}(C_NULL)
    check(L.a2pack_bag_reader_open(_cstr(spec), opts, out))
    BagReader(out[])
end

Base.length(r::BagReader) = Int(L.a2pack_bag_reader_count(_ptr(r)))
Base.firstindex(::BagReader) = 1
Base.lastindex(r::BagReader) = length(r)
Base.eltype(::Type{BagReader}) = Vector{UInt8}
function Base.getindex(r::BagReader, i::Integer)
    b = read_batch(r, [i])
    try
        return b[1]
    finally
        close(b)
    end
end
function Base.getindex(r::BagReader, idx::AbstractVector{<:Integer})
    b = read_batch(r, idx)
    try
        return collect(b)
    finally
        close(b)
    end
end
function Base.getindex(r::BagReader, rng::AbstractUnitRange{<:Integer})
    n = length(r)
    isempty(rng) && return Vector{UInt8}[]
    (first(rng) >= 1 && last(rng) <= n) || throw(BoundsError(r, rng))
    out = Ref{Ptr{L.a2pack_bag_batch}}(C_NULL)
    check(L.a2pack_bag_reader_read_range(r, first(rng) - 1, length(rng), 0, out))
    b = BagBatch(out[])
    try
        return collect(b)
    finally
        close(b)
    end
end
# Iteration reads ahead in batches of 256 records (one C call per batch).
function Base.iterate(r::BagReader, state=(1, Vector{UInt8}[], 0))
    i, buf, k = state
    if k == length(buf)
        i > length(r) && return nothing
        buf = r[i:min(i + 255, length(r))]
        k = 0
    end
    (buf[k+1], (i + 1, buf, k + 1))
end
Base.show(io::IO, r::BagReader) = print(io, "A2Pack.BagReader(", isopen(r) ? "$(length(r)) records" : "closed", ")")

"""
    BagBatch

Records read in one call, in one buffer: `b[i]` copies record i, `records(b)`
gives views (`LibArray`s) that keep the batch alive.
"""
mutable struct BagBatch <: Handle
    ptr::Ptr{L.a2pack_bag_batch}
    keep::Any  # what this handle's memory depends on, kept alive with it
    BagBatch(p::Ptr{L.a2pack_bag_batch}, keep=nothing) = finalizer(_finalize, new(p, keep))
end
_release(::BagBatch, p) = L.a2pack_bag_batch_close(p)

"Read records `indices` (1-based, any order, repeats allowed) into one batch."
function read_batch(r::BagReader, indices::AbstractVector{<:Integer}; workers::Integer=0)
    n = length(r)
    ids = UInt64[_index0(n, i) for i in indices]
    out = Ref{Ptr{L.a2pack_bag_batch}}(C_NULL)
    check(L.a2pack_bag_reader_read(r, ids, length(ids), workers, out))
    BagBatch(out[])
end
function _view(b::BagBatch)
    d = Ref{Ptr{UInt8}}(C_NULL); o = Ref{Ptr{UInt64}}(C_NULL); n = Ref{Csize_t}(0)
    L.a2pack_bag_batch_view(_ptr(b), d, o, n)
    d[], o[], Int(n[])
end
Base.length(b::BagBatch) = _view(b)[3]
function Base.getindex(b::BagBatch, i::Integer)
    d, o, n = _view(b)
    1 <= i <= n || throw(BoundsError(b, i))
    lo, hi = unsafe_load(o, i), unsafe_load(o, i + 1)
    copy(unsafe_wrap(Array, d + lo, Int(hi - lo)))
end
Base.iterate(b::BagBatch, i::Int=1) = i > length(b) ? nothing : (b[i], i + 1)
Base.eltype(::Type{BagBatch}) = Vector{UInt8}
"Views of every record of the batch (no copy)."
function records(b::BagBatch)
    d, o, n = _view(b)
    [LibArray(d + unsafe_load(o, i), Int(unsafe_load(o, i + 1) - unsafe_load(o, i)), b) for i in 1:n]
end

"""
    BagWriter(path; compression=:auto, level=0, separate_limits=false, durable=true)

`write(w, bytes)` appends a record; `commit!(w)` finishes the file (it appears
only then). `open(BagWriter, path) do w ... end` commits when the block
returns and leaves nothing when it throws.
"""
mutable struct BagWriter <: Handle
    ptr::Ptr{L.a2pack_bag_writer}
    keep::Any  # what this handle's memory depends on, kept alive with it
    BagWriter(p::Ptr{L.a2pack_bag_writer}, keep=nothing) = finalizer(_finalize, new(p, keep))
end
_release(::BagWriter, p) = L.a2pack_bag_writer_close(p)
function BagWriter(path::AbstractString; compression::Symbol=:auto, level::Integer=0,
                   separate_limits::Bool=false, durable::Bool=true)
    opts = _options(L.a2pack_bag_writer_options, L.a2pack_bag_writer_options_init,
                    :compression => _bag_compression(compression), :zstd_level => level,
                    :limits_placement => separate_limits ? L.A2PACK_BAG_LIMITS_SEPARATE : L.A2PACK_BAG_LIMITS_TAIL,
                    :durable => Int32(durable))
    out = Ref{Ptr{L.a2pack_bag_writer}}(C_NULL)
    check(L.a2pack_bag_writer_open(_cstr(path), opts, out))
    BagWriter(out[])
end
function Base.write(w::BagWriter, bytes::AbstractVector{UInt8})
    GC.@preserve bytes check(L.a2pack_bag_writer_write(w, bytes, length(bytes)))
    length(bytes)
end
Base.write(w::BagWriter, s::AbstractString) = write(w, Vector{UInt8}(codeunits(s)))
Base.flush(w::BagWriter) = check(L.a2pack_bag_writer_flush(w))
Base.length(w::BagWriter) = Int(L.a2pack_bag_writer_count(_ptr(w)))
commit!(w::BagWriter) = check(L.a2pack_bag_writer_commit(w))
function Base.open(f::Function, ::Type{BagWriter}, path::AbstractString; kw...)
    w = BagWriter(path; kw...)
    try
        r = f(w)
        commit!(w)
        return r
    finally
        close(w)
    end
end

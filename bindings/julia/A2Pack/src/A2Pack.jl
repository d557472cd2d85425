"""
    A2Pack

Julia interface to liba2pack: 2048 run files, packfiles, step datasets, Bagz
record files and the sparse-vector data logger, over the library's C ABI.

The library is found at load time: `ENV["A2PACK_LIBRARY"]`, else pkg-config's
`a2pack` install (`libdir`), else the repository's `build/liba2pack.so`; it is
opened by absolute path. Every C call goes through the generated
[`LibA2Pack`](@ref) module; this file adds handles with finalizers, Julia
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

# ---------------------------------------------------------------- library

function _find_library()
    p = get(ENV, "A2PACK_LIBRARY", "")
    isempty(p) || return abspath(p)
    try
        dir = readchomp(pipeline(`pkg-config --variable=libdir a2pack`; stderr=devnull))
        cand = joinpath(dir, "liba2pack.so")
        isempty(dir) || !isfile(cand) || return cand
    catch
        # pkg-config missing or no a2pack.pc: try the repository's build.
    end
    cand = normpath(joinpath(@__DIR__, "..", "..", "..", "..", "build", "liba2pack.so"))
    isfile(cand) && return cand
    error("A2Pack: liba2pack.so not found: set ENV[\"A2PACK_LIBRARY\"] to its absolute path, " *
          "install it where pkg-config finds a2pack.pc, or build the repository (make build)")
end

function __init__()
    L.load_library(_find_library())
end

"Absolute path of the liba2pack in use."
library_path() = L.library_path()
"Version of the loaded library (\"MAJOR.MINOR.PATCH\")."
version() = unsafe_string(L.a2pack_version())
"zstd release the library compresses with."
zstd_version() = unsafe_string(L.a2pack_zstd_version())
"LZ4 release the library compresses packfile entries with."
lz4_version() = unsafe_string(L.a2pack_lz4_version())
abi_version() = Int(L.a2pack_abi_version())

# ---------------------------------------------------------------- errors

"""
    A2PackError(status, name, message)

A failed library call: `status` is the negative `a2pack_status`, `name` its
symbolic name (`"A2PACK_E_CORRUPT"`), `message` the library's description
naming the file, offset or index and what was wrong.
"""
struct A2PackError <: Exception
    status::Int32
    name::String
    message::String
end

A2PackError(status::Integer, message::AbstractString) =
    A2PackError(Int32(status), unsafe_string(L.a2pack_status_name(status)), String(message))

Base.showerror(io::IO, e::A2PackError) = print(io, "A2PackError ", e.name, " (", e.status, "): ", e.message)

# Throw for a failed status, with this thread's message. Called right after
# the C call: no task switch can happen in between (ccall does not yield).
@inline function check(status)
    status == L.A2PACK_OK && return nothing
    throw(A2PackError(status, unsafe_string(L.a2pack_last_error())))
end

closed_error(what) = A2PackError(L.A2PACK_E_CLOSED, "$what is closed")

# A string the library reads as NUL-terminated must not contain NUL.
function _cstr(s::AbstractString)
    s = String(s)
    occursin('\0', s) && throw(ArgumentError("string contains a NUL byte: $(repr(s))"))
    return s
end

# Copy an owned buffer handed out by the library, then release it.
function _take_owned(p::Ptr{T}, n::Integer) where {T}
    p == C_NULL && return T[]
    try
        return copy(unsafe_wrap(Array, p, Int(n)))
    finally
        L.a2pack_free(p)
    end
end

function _take_string(p::Ptr{Cchar})
    p == C_NULL && return ""
    try
        return unsafe_string(p)
    finally
        L.a2pack_free(p)
    end
end

# An options struct filled by its *_options_init, with fields replaced.
function _options(::Type{T}, init, kv...) where {T}
    r = Ref{T}()
    # init only writes; zero `size` first is not needed: init sets it.
    init(r)
    isempty(kv) ? r : Ref(_with(r[], kv...))
end

# A copy of the isbits struct `x` with the fields named in `kv` replaced.
function _with(x::T, kv::Pair{Symbol}...) where {T}
    d = Dict{Symbol,Any}(kv)
    for k in keys(d)
        hasfield(T, k) || throw(ArgumentError("$T has no field $k"))
    end
    T((haskey(d, f) ? convert(fieldtype(T, f), d[f]) : getfield(x, f) for f in fieldnames(T))...)
end

# A zeroed output struct whose leading `size` field says how much to fill.
_out(::Type{T}) where {T} = Ref(_make(T))

# A struct of the header with the given fields, every other field zero and a
# leading `size` set: built by name, so fields appended to the C struct later
# (zero = their documented default) do not break this code.
function _make(::Type{T}; kw...) where {T}
    z = Ref{T}()
    _zero!(z)
    kv = Pair{Symbol,Any}[k => v for (k, v) in kw]
    hasfield(T, :size) && !haskey(kw, :size) && push!(kv, :size => sizeof(T))
    isempty(kv) ? z[] : _with(z[], kv...)
end
# Zero the bytes behind a Ref of an isbits struct (padding included).
function _zero!(r::Ref{T}) where {T}
    GC.@preserve r begin
        p = Ptr{UInt8}(Base.unsafe_convert(Ptr{T}, r))
        for i in 0:sizeof(T)-1
            unsafe_store!(p, 0x00, i + 1)
        end
    end
    r
end

# ---------------------------------------------------------------- handles

"""Handles own a library object; `close` releases it (idempotent), and a
finalizer does so for handles that are never closed."""
abstract type Handle end

Base.isopen(h::Handle) = h.ptr != C_NULL
function _ptr(h::Handle)
    h.ptr == C_NULL && throw(closed_error(nameof(typeof(h))))
    h.ptr
end
# A handle passes to a wrapper's Ptr argument as its pointer; ccall keeps the
# handle (and so its finalizer) from running during the call.
Base.cconvert(::Type{Ptr{T}}, h::Handle) where {T} = h
Base.unsafe_convert(::Type{Ptr{T}}, h::Handle) where {T} = Ptr{T}(_ptr(h))

# Release once; also the finalizer, which must not throw.
function _finalize(h::Handle)
    p = h.ptr
    if p != C_NULL
        h.ptr = C_NULL
        _release(h, p)
    end
    nothing
end
Base.close(h::Handle) = _finalize(h)

"""
    open(f, T, args...; kw...)

Open a `T` (`Pack`, `BagReader`, `Dataset`, `Logger`, `Run`, ...), call `f` on it
and close it, also when `f` throws. For writers (`PackWriter`, `BagWriter`) the
file is committed when `f` returns and abandoned (nothing left under its name)
when it throws.
"""
function Base.open(f::Function, ::Type{T}, args...; kw...) where {T<:Handle}
    h = T(args...; kw...)
    try
        return f(h)
    finally
        close(h)
    end
end
Base.open(::Type{T}, args...; kw...) where {T<:Handle} = T(args...; kw...)


"""
    LibArray{T,N}

An array viewing memory of a library object (`unsafe_wrap`, no copy). It keeps
its owner alive while reachable; after an explicit `close(owner)` reading it
throws `A2PackError` (A2PACK_E_CLOSED). Read-only. `copy` gives a plain Array.
"""
struct LibArray{T,N,O} <: DenseArray{T,N}
    data::Array{T,N}
    owner::O
end
LibArray(p::Ptr{T}, dims, owner) where {T} =
    LibArray(p == C_NULL ? zeros(T, dims) : unsafe_wrap(Array, p, dims; own=false), owner)
Base.size(a::LibArray) = size(a.data)
Base.IndexStyle(::Type{<:LibArray}) = IndexLinear()
@inline function Base.getindex(a::LibArray, i::Int)
    isopen(a.owner) || throw(closed_error(nameof(typeof(a.owner))))
    @boundscheck checkbounds(a.data, i)
    @inbounds a.data[i]
end
Base.unsafe_convert(::Type{Ptr{T}}, a::LibArray{T}) where {T} = Base.unsafe_convert(Ptr{T}, a.data)
Base.elsize(::Type{<:LibArray{T}}) where {T} = sizeof(T)
Base.strides(a::LibArray) = strides(a.data)
Base.copy(a::LibArray) = (isopen(a.owner) || throw(closed_error(nameof(typeof(a.owner)))); copy(a.data))

# 1-based indexing helpers shared by the collections below.
@inline function _index0(n::Integer, i::Integer)
    1 <= i <= n || throw(BoundsError(1:n, i))
    UInt64(i - 1)
end

# ---------------------------------------------------------------- board

board_score(b::Integer) = Int(L.a2pack_board_score(UInt64(b)))
highest_tile(b::Integer) = Int(L.a2pack_board_highest_tile(UInt64(b)))
apply_move(b::Integer, move::Integer) = L.a2pack_board_apply_move(UInt64(b), UInt32(move))
legal_moves(b::Integer) = Int(L.a2pack_board_legal_moves(UInt64(b)))
function branches_normalise(ev::AbstractVector{<:Real}, legal_mask::Integer)
    length(ev) == 4 || throw(ArgumentError("ev must have 4 values (Up, Down, Left, Right)"))
    e = Float32.(collect(ev))
    out = zeros(Float32, 4)
    L.a2pack_branches_normalise(e, UInt32(legal_mask), out)
    out
end

# ---------------------------------------------------------------- runs

"""
    Run(path) / load_run(path) / decode_run(bytes) / Run(meta, boards, moves; ...)

A decoded 2048 run (v1 files are upgraded to v2 shape). A collection of
[`Step`](@ref)s: `length`, `r[i]` (1-based, ranges too), iteration.
"""
mutable struct Run <: Handle
    ptr::Ptr{L.a2pack_run}
    keep::Any  # what this handle's memory depends on, kept alive with it
    Run(p::Ptr{L.a2pack_run}, keep=nothing) = finalizer(_finalize, new(p, keep))
end
_release(::Run, p) = L.a2pack_run_close(p)

"One step of a run: the board before it, the chosen move (0..3 = Up, Down,
Left, Right), the branch values (UDLR) and legality mask when stored."
struct Step
    pre_board::UInt64
    move::UInt8
    branches::Union{Nothing,NTuple{4,Float32}}
    legal_mask::UInt8
end

"Run metadata (`engine` is `nothing` when the run stores none)."
struct RunMeta
    steps::UInt32
    start_unix_s::UInt64
    elapsed_s::Float32
    max_score::UInt64
    highest_tile::UInt32
    engine::Union{Nothing,String}
end

function _new_run(f)
    out = Ref{Ptr{L.a2pack_run}}(C_NULL)
    check(f(out))
    Run(out[])
end

Run(path::AbstractString) = load_run(path)
load_run(path::AbstractString) = _new_run(out -> L.a2pack_run_load(_cstr(path), out))
decode_run(bytes::AbstractVector{UInt8}) =
    GC.@preserve bytes _new_run(out -> L.a2pack_run_decode(bytes, length(bytes), out))

"`:v1` or `:v2`, from a payload's first bytes."
detect_kind(bytes::AbstractVector{UInt8}) = _kind_symbol(L.a2pack_run_detect_kind(bytes, length(bytes)))
_kind_symbol(k) = k == L.A2PACK_RUN_V1 ? :v1 : k == L.A2PACK_RUN_V2 ? :v2 : :unknown
function _kind_value(k::Symbol)
    k === :v1 && return L.A2PACK_RUN_V1
    k === :v2 && return L.A2PACK_RUN_V2
    throw(ArgumentError("run kind must be :v1 or :v2, got :$k"))
end

"""
    Run(meta::RunMeta, boards, moves; values=nothing, legal_masks=nothing,
        branch_present=nothing, final_board=0)

Build a run from arrays (`values` is 4 × n, UDLR per step).
"""
function Run(m::RunMeta, bds::AbstractVector{<:Integer}, mvs::AbstractVector{<:Integer};
             values=nothing, legal_masks=nothing, branch_present=nothing, final_board::Integer=0)
    n = length(bds)
    length(mvs) == n || throw(DimensionMismatch("boards has $n entries, moves $(length(mvs))"))
    b = Vector{UInt64}(bds)
    mv = Vector{UInt8}(mvs)
    v = values === nothing ? C_NULL : Vector{Float32}(vec(values))
    v === C_NULL || length(v) == 4n || throw(DimensionMismatch("values must hold 4 × $n floats"))
    lm = legal_masks === nothing ? C_NULL : Vector{UInt8}(legal_masks)
    bp = branch_present === nothing ? C_NULL : Vector{UInt8}(branch_present)
    engine = m.engine === nothing ? UInt8[] : Vector{UInt8}(codeunits(m.engine))
    GC.@preserve b mv v lm bp engine begin
        cm = Ref(_make(L.a2pack_run_meta; steps=m.steps, start_unix_s=m.start_unix_s,
                       elapsed_s=m.elapsed_s, max_score=m.max_score, highest_tile=m.highest_tile,
                       has_engine=m.engine === nothing ? 0 : 1,
                       engine=m.engine === nothing ? C_NULL : pointer(engine),
                       engine_len=length(engine)))
        _new_run(out -> L.a2pack_run_create(cm, n, b, mv,
                                            v === C_NULL ? Ptr{Float32}(C_NULL) : v,
                                            lm === C_NULL ? Ptr{UInt8}(C_NULL) : lm,
                                            bp === C_NULL ? Ptr{UInt8}(C_NULL) : bp,
                                            UInt64(final_board), out))
    end
end

function meta(r::Run)
    out = _out(L.a2pack_run_meta)
    check(L.a2pack_run_get_meta(r, out))
    m = out[]
    engine = m.has_engine == 0 ? nothing : m.engine_len == 0 ? "" :
        String(copy(unsafe_wrap(Array, Ptr{UInt8}(m.engine), Int(m.engine_len))))
    RunMeta(m.steps, m.start_unix_s, m.elapsed_s, m.max_score, m.highest_tile, engine)
end

Base.length(r::Run) = Int(L.a2pack_run_step_count(_ptr(r)))
final_board(r::Run) = L.a2pack_run_final_board(_ptr(r))
has_branches(r::Run) = L.a2pack_run_has_branches(_ptr(r)) != 0
source_kind(r::Run) = _kind_symbol(L.a2pack_run_source_kind(_ptr(r)))

"Columns of steps `first:first+n-1` (1-based) as fresh arrays."
function _steps(r::Run, first::Integer, n::Integer)
    b = Vector{UInt64}(undef, n); m = Vector{UInt8}(undef, n)
    v = Matrix{Float32}(undef, 4, n); lm = Vector{UInt8}(undef, n); bp = Vector{UInt8}(undef, n)
    check(L.a2pack_run_get_steps(r, first - 1, n, b, m, v, lm, bp))
    (boards=b, moves=m, values=v, legal_masks=lm, branch_present=bp)
end

boards(r::Run) = _steps(r, 1, length(r)).boards
moves(r::Run) = _steps(r, 1, length(r)).moves

function Base.getindex(r::Run, i::Integer)
    n = length(r)
    1 <= i <= n || throw(BoundsError(r, i))
    s = _steps(r, i, 1)
    Step(s.boards[1], s.moves[1], s.branch_present[1] != 0 ? Tuple(s.values[:, 1]) : nothing,
         s.legal_masks[1])
end
function Base.getindex(r::Run, rng::AbstractUnitRange{<:Integer})
    n = length(r)
    isempty(rng) && return Step[]
    (first(rng) >= 1 && last(rng) <= n) || throw(BoundsError(r, rng))
    s = _steps(r, first(rng), length(rng))
    [Step(s.boards[k], s.moves[k], s.branch_present[k] != 0 ? Tuple(s.values[:, k]) : nothing,
          s.legal_masks[k]) for k in 1:length(rng)]
end
Base.getindex(r::Run, idx::AbstractVector{<:Integer}) = [r[i] for i in idx]
Base.firstindex(::Run) = 1
Base.lastindex(r::Run) = length(r)
Base.eltype(::Type{Run}) = Step
Base.iterate(r::Run, i::Int=1) = i > length(r) ? nothing : (r[i], i + 1)
Base.show(io::IO, r::Run) = isopen(r) ?
    print(io, "A2Pack.Run(", length(r), " steps, ", source_kind(r), ", final board 0x",
          string(final_board(r); base=16, pad=16), ")") : print(io, "A2Pack.Run(closed)")

"""
    encode(r; kind=:v2, drop_branches=false) -> Vector{UInt8}

The run's file bytes (v2 byte-exact for runs decoded from v2).
"""
function encode(r::Run; kind::Symbol=:v2, drop_branches::Bool=false)
    data = Ref{Ptr{UInt8}}(C_NULL); len = Ref{Csize_t}(0)
    check(L.a2pack_run_encode(r, _kind_value(kind), drop_branches ? L.A2PACK_ENCODE_DROP_BRANCHES : 0,
                              data, len))
    _take_owned(data[], len[])
end

"Write the run to `path` atomically."
save(r::Run, path::AbstractString; kind::Symbol=:v2, drop_branches::Bool=false) =
    check(L.a2pack_run_save(r, _cstr(path), _kind_value(kind),
                            drop_branches ? L.A2PACK_ENCODE_DROP_BRANCHES : 0))

function upgrade_v1(bytes::AbstractVector{UInt8})
    data = Ref{Ptr{UInt8}}(C_NULL); len = Ref{Csize_t}(0)
    GC.@preserve bytes check(L.a2pack_run_upgrade_v1(bytes, length(bytes), data, len))
    _take_owned(data[], len[])
end

# ---------------------------------------------------------------- run batches

"""
    RunBatch

Many runs decoded into columns (`columns(b)`: arrays viewing the batch's
memory, kept alive by the arrays). `length` is the number of runs.
"""
mutable struct RunBatch <: Handle
    ptr::Ptr{L.a2pack_run_batch}
    keep::Any  # what this handle's memory depends on, kept alive with it
    RunBatch(p::Ptr{L.a2pack_run_batch}, keep=nothing) = finalizer(_finalize, new(p, keep))
end
_release(::RunBatch, p) = L.a2pack_run_batch_close(p)

function RunBatch(payloads::AbstractVector{<:AbstractVector{UInt8}}; workers::Integer=0)
    ptrs = [pointer(p) for p in payloads]
    lens = Csize_t[length(p) for p in payloads]
    out = Ref{Ptr{L.a2pack_run_batch}}(C_NULL)
    GC.@preserve payloads check(L.a2pack_run_batch_decode(ptrs, lens, length(payloads), workers, out))
    RunBatch(out[])
end

"""
    RunBatch(paths::AbstractVector{<:AbstractString}; workers=0)

Read run files and decode them into one batch; the library's workers read and
decode the files in parallel. A bad file throws `A2PackError` naming its path.
`payload_bytes(b)` is the files' total size.
"""
function RunBatch(paths::AbstractVector{<:AbstractString}; workers::Integer=0)
    strs = [_cstr(p) for p in paths]
    ptrs = [pointer(s) for s in strs]
    out = Ref{Ptr{L.a2pack_run_batch}}(C_NULL)
    GC.@preserve strs check(L.a2pack_run_batch_load(ptrs, length(ptrs), workers, out))
    RunBatch(out[])
end

"""Total encoded bytes a batch was decoded from (payloads or files)."""
payload_bytes(b::RunBatch) = Int(L.a2pack_run_batch_payload_bytes(b))

function columns(b::RunBatch)
    out = _out(L.a2pack_run_columns)
    check(L.a2pack_run_batch_columns(b, out))
    c = out[]
    nr, ns = Int(c.n_runs), Int(c.n_steps)
    (step_offsets=LibArray(c.step_offsets, nr + 1, b), boards=LibArray(c.boards, ns, b),
     moves=LibArray(c.moves, ns, b), branch_values=LibArray(c.branch_values, (4, ns), b),
     legal_masks=LibArray(c.legal_masks, ns, b), branch_present=LibArray(c.branch_present, ns, b),
     final_boards=LibArray(c.final_boards, nr, b), meta_steps=LibArray(c.meta_steps, nr, b),
     max_score=LibArray(c.max_score, nr, b), highest_tile=LibArray(c.highest_tile, nr, b),
     source_kind=LibArray(c.source_kind, nr, b))
end
Base.length(b::RunBatch) = (out = _out(L.a2pack_run_columns); check(L.a2pack_run_batch_columns(b, out)); Int(out[].n_runs))
Base.show(io::IO, b::RunBatch) = print(io, "A2Pack.RunBatch(", isopen(b) ? "$(length(b)) runs" : "closed", ")")

# ---------------------------------------------------------------- gen

function _gen_options(; policy::Symbol=:expectimax, depth::Integer=2, format::Symbol=:v2,
                      jobs::Integer=0, start_unix_s::Integer=0, max_steps::Integer=0)
    pol = policy === :expectimax ? L.A2PACK_POLICY_EXPECTIMAX : policy === :greedy ?
        L.A2PACK_POLICY_GREEDY : policy === :random ? L.A2PACK_POLICY_RANDOM :
        throw(ArgumentError("policy must be :expectimax, :greedy or :random"))
    kv = Pair{Symbol,Any}[:policy => pol, :depth => depth, :format => _kind_value(format),
                          :jobs => jobs, :max_steps => max_steps]
    start_unix_s == 0 || push!(kv, :start_unix_s => start_unix_s)
    _options(L.a2pack_gen_options, L.a2pack_gen_options_init, kv...)
end

"Play one game (same seed and options, same run)."
gen_run(seed::Integer; kw...) = _new_run(out -> L.a2pack_gen_run(_gen_options(; kw...), UInt64(seed), out))

"Play `n_runs` games into `dir`/run-NNNNNN.a2run2."
gen_dir(dir::AbstractString, n_runs::Integer; seed::Integer=0, kw...) =
    check(L.a2pack_gen_dir(_gen_options(; kw...), _cstr(dir), n_runs, seed, C_NULL, C_NULL))

# ---------------------------------------------------------------- packs

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

# ---------------------------------------------------------------- bags

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

# ---------------------------------------------------------------- datasets

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

# ---------------------------------------------------------------- logger

"""
    Logger(dir; ring_bytes, rotate_bytes, zstd_level, frame_bytes, flush_interval_ms, when_full=:block)

A data logger on folder `dir`: `register_stream`, `record`, `flush`, `close`.
Usable from several threads at once.
"""
mutable struct Logger <: Handle
    ptr::Ptr{L.a2pack_logger}
    keep::Any  # what this handle's memory depends on, kept alive with it
    Logger(p::Ptr{L.a2pack_logger}, keep=nothing) = finalizer(_finalize, new(p, keep))
end
_release(::Logger, p) = L.a2pack_logger_close(p)
function Logger(dir::AbstractString; when_full::Symbol=:block, kw...)
    kv = Pair{Symbol,Any}[k => v for (k, v) in kw]
    push!(kv, :when_full => (when_full === :block ? L.A2PACK_LOGGER_BLOCK : when_full === :return_full ?
        L.A2PACK_LOGGER_RETURN_FULL : throw(ArgumentError("when_full must be :block or :return_full"))))
    opts = _options(L.a2pack_logger_options, L.a2pack_logger_options_init, kv...)
    out = Ref{Ptr{L.a2pack_logger}}(C_NULL)
    check(L.a2pack_logger_open(_cstr(dir), opts, out))
    Logger(out[])
end
# close reports a failed final flush; the finalizer cannot throw, it only releases.
function Base.close(lg::Logger)
    p = lg.ptr
    p == C_NULL && return nothing
    lg.ptr = C_NULL
    check(L.a2pack_logger_close(p))
end

"""
    register_stream(lg, labels_json; epoch_scale, value_scale, sort=false) -> UInt32

Register a stream (labels as a JSON object text); epochs are stored as
multiples of `epoch_scale`, values of `value_scale`.
"""
function register_stream(lg::Logger, labels_json::AbstractString="{}"; epoch_scale::Real,
                         value_scale::Real, sort::Bool=false)
    id = Ref{UInt32}(0)
    check(L.a2pack_logger_register_stream(lg, _cstr(labels_json), epoch_scale, value_scale,
                                          sort ? L.A2PACK_LOGGER_SORT : 0, id))
    id[]
end

"Record one sparse vector (`indices` strictly increasing unless the stream sorts)."
function record(lg::Logger, stream_id::Integer, epoch::Real, indices::AbstractVector{<:Integer},
                values::AbstractVector{<:Real})
    length(indices) == length(values) ||
        throw(DimensionMismatch("$(length(indices)) indices but $(length(values)) values"))
    ix = indices isa Vector{UInt32} ? indices : Vector{UInt32}(indices)
    vs = values isa Vector{Float64} ? values : Vector{Float64}(values)
    check(L.a2pack_logger_record(lg, stream_id, epoch, ix, vs, length(ix)))
end

"Make everything recorded so far durable."
Base.flush(lg::Logger) = check(L.a2pack_logger_flush(lg))

"""
    decode_log(dir; workers=0, strict=false) -> LogData

Decoded records of a logger folder: a collection of
`(stream_id, epoch, indices, values)` (`length`, `d[i]`, iteration);
`columns(d)` views of all columns, `log_summary(d)`, `problems(d)`.
"""
mutable struct LogData <: Handle
    ptr::Ptr{L.a2pack_logger_data}
    keep::Any  # what this handle's memory depends on, kept alive with it
    LogData(p::Ptr{L.a2pack_logger_data}, keep=nothing) = finalizer(_finalize, new(p, keep))
end
_release(::LogData, p) = L.a2pack_logger_data_close(p)
function decode_log(dir::AbstractString; workers::Integer=0, strict::Bool=false)
    opts = _options(L.a2pack_logger_decode_options, L.a2pack_logger_decode_options_init,
                    :workers => workers, :strict => UInt32(strict))
    out = Ref{Ptr{L.a2pack_logger_data}}(C_NULL)
    check(L.a2pack_logger_decode(_cstr(dir), opts, out))
    LogData(out[])
end
function columns(d::LogData)
    out = _out(L.a2pack_logger_columns)
    check(L.a2pack_logger_data_columns(d, out))
    c = out[]
    nr, nv = Int(c.n_records), Int(c.n_values)
    (stream_ids=LibArray(c.stream_ids, nr, d), epochs=LibArray(c.epochs, nr, d),
     offsets=LibArray(c.offsets, nr + 1, d), indices=LibArray(c.indices, nv, d),
     values=LibArray(c.values, nv, d))
end
function log_summary(d::LogData)
    out = _out(L.a2pack_logger_summary)
    check(L.a2pack_logger_data_summary(d, out))
    s = out[]
    NamedTuple{fieldnames(L.a2pack_logger_summary)[2:end]}(Tuple(Int(getfield(s, f)) for f in fieldnames(L.a2pack_logger_summary)[2:end]))
end
function problems(d::LogData)
    n = log_summary(d).problems
    map(0:n-1) do i
        out = _out(L.a2pack_logger_problem)
        check(L.a2pack_logger_data_problem(d, i, out))
        p = out[]
        str(q) = q == C_NULL ? "" : unsafe_string(q)
        (status=Int(p.status), offset=Int(p.offset), path=str(p.path), message=str(p.message))
    end
end
Base.length(d::LogData) = Int(log_summary(d).records)
function Base.getindex(d::LogData, i::Integer)
    c = columns(d)
    1 <= i <= length(c.stream_ids) || throw(BoundsError(d, i))
    lo, hi = Int(c.offsets[i]), Int(c.offsets[i+1])
    (stream_id=c.stream_ids[i], epoch=c.epochs[i], indices=c.indices.data[lo+1:hi], values=c.values.data[lo+1:hi])
end
Base.iterate(d::LogData, i::Int=1) = i > length(d) ? nothing : (d[i], i + 1)
Base.eltype(::Type{LogData}) = NamedTuple{(:stream_id, :epoch, :indices, :values),Tuple{UInt32,Float64,Vector{UInt32},Vector{Float64}}}
Base.show(io::IO, d::LogData) = print(io, "A2Pack.LogData(", isopen(d) ? "$(length(d)) records" : "closed", ")")
Base.show(io::IO, lg::Logger) = print(io, "A2Pack.Logger(", isopen(lg) ? "open" : "closed", ")")

end # module A2Pack

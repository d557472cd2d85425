# Run files (.a2run2 v1/v2): loading, decoding, encoding, saving, and batches of runs.

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

# Batches of runs.

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

# The sparse-vector data logger: writing streams and decoding a log.

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

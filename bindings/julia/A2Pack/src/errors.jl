# A2PackError: a failed call's status, its name and the library's message.

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

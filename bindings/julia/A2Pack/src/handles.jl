# Handles that own a library object: `close` and finalizers.

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

# Finding and opening liba2pack, and the library's version.

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

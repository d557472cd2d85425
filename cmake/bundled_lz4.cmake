# LZ4 1.10.0 for packfile entries compressed with lz4 (docs/pack.md), built
# from its release sources into liba2pack (static, hidden), as zstd is
# (cmake/bundled_zstd.cmake).
#
# Where the sources come from: the `lz4-sys` crate on crates.io carries
# liblz4's unmodified release tree under liblz4/lib (1.10.0 in
# 1.11.1+lz4-1.10.0), fetched and pinned by SHA-256 (the checksum in
# crates.io's index) into the .deps/ cache by cmake/crate_sources.cmake.
# Only lz4.c, lz4hc.c, lz4frame.c and xxhash.c are compiled: packfile entries
# are LZ4 frames (lz4frame.h), and HC is what levels 3 and up use.
# Without the archive and without network the build falls back to the
# system liblz4 (Debian's liblz4-dev) with a warning; A2PACK_BUNDLED_LZ4=OFF
# asks for that. The frame format is the same either way.
#
# Sets A2PACK_LZ4 to the target to link, A2PACK_LZ4_BUNDLED and, when
# bundled, A2PACK_LZ4_LICENSE.

include(${CMAKE_CURRENT_LIST_DIR}/crate_sources.cmake)
option(A2PACK_BUNDLED_LZ4 "Build LZ4 1.10.0 into the library (see cmake/bundled_lz4.cmake) instead of linking the system liblz4" ON)
set(A2PACK_LZ4_CRATE_VERSION "1.11.1+lz4-1.10.0")
set(A2PACK_LZ4_CRATE_SHA256 "6bd8c0d6c6ed0cd30b3652886bb8711dc4bb01d637a68105a3d5158039b418e6")

set(A2PACK_LZ4_BUNDLED OFF)
if(A2PACK_BUNDLED_LZ4)
  # liblz4's LICENSE (BSD 2-clause) travels with the Python wheel.
  a2pack_fetch_crate(lz4_crate lz4-sys ${A2PACK_LZ4_CRATE_VERSION} ${A2PACK_LZ4_CRATE_SHA256}
    "liblz4/lib/lz4*" "liblz4/lib/xxhash*" "liblz4/lib/LICENSE")
  if(lz4_crate)
    set(lz4_lib "${lz4_crate}/liblz4/lib")
    set(A2PACK_LZ4_LICENSE "${lz4_lib}/LICENSE")
    add_library(a2pack_lz4 STATIC "${lz4_lib}/lz4.c" "${lz4_lib}/lz4hc.c"
      "${lz4_lib}/lz4frame.c" "${lz4_lib}/xxhash.c")
    target_include_directories(a2pack_lz4 SYSTEM PUBLIC "${lz4_lib}")
    # No symbols of liblz4's own in liba2pack's interface: its visibility
    # macros emptied (the hidden preset then applies) and xxhash's names
    # prefixed, so they can never meet zstd's copy or a program's own.
    target_compile_definitions(a2pack_lz4
      PRIVATE XXH_NAMESPACE=A2PACK_LZ4_
      PUBLIC LZ4LIB_VISIBILITY= LZ4FLIB_VISIBILITY=)
    set_target_properties(a2pack_lz4 PROPERTIES C_VISIBILITY_PRESET hidden
      POSITION_INDEPENDENT_CODE ON)
    target_compile_options(a2pack_lz4 PRIVATE $<$<COMPILE_LANGUAGE:C>:-O3>)
    # The frames' content checksum is XXH32, whose loop gcc 12 vectorises
    # into something 6x slower (1.8 against 10.6 GB/s measured on this
    # project's build machine; xxhash 0.6.5, as in liblz4, predates the
    # guard newer xxhash releases put in): with it on, checking the
    # checksum took 4x as long as decompressing the entry.
    set_source_files_properties("${lz4_lib}/xxhash.c" PROPERTIES COMPILE_OPTIONS -fno-tree-vectorize)
    set(A2PACK_LZ4 a2pack_lz4)
    set(A2PACK_LZ4_BUNDLED ON)
    message(STATUS "a2pack: LZ4 1.10.0 built from ${lz4_lib}")
  else()
    message(WARNING "a2pack: using the system liblz4 (liblz4-dev) instead of LZ4 1.10.0")
  endif()
endif()
if(NOT A2PACK_LZ4_BUNDLED)
  pkg_check_modules(LZ4 REQUIRED IMPORTED_TARGET liblz4)
  set(A2PACK_LZ4 PkgConfig::LZ4)
endif()

# zstd 1.5.7, built from its release sources into liba2pack (static, hidden).
#
# Why not Debian's libzstd: Debian 12 ships 1.5.4, which compresses this
# project's run payloads 25 % slower than 1.5.7 at the same level and output
# format (242.6 against 181.3 us per 48 KiB record at level 3, measured in
# docs/bag.md) - the whole difference in the .bagz write benchmarks, which
# bagz (bundling 1.5.7) wins on compression alone. The frames are the same
# zstd format either way; only speed changes.
#
# Where the sources come from: the `zstd-sys` crate on crates.io carries the
# unmodified zstd release tree under zstd/lib. A .crate is a gzipped tarball,
# so CMake fetches it with file(DOWNLOAD), pinned by SHA-256 (the checksum in
# crates.io's index), into a cache beside the sources (.deps/), so a checkout
# downloads it once and later builds - the Python wheel's included - work
# offline. Without the archive and without network, the build falls back to
# the system libzstd with a warning (A2PACK_BUNDLED_ZSTD=OFF asks for that).
#
# Sets A2PACK_ZSTD to the target to link, and A2PACK_ZSTD_BUNDLED.

include(${CMAKE_CURRENT_LIST_DIR}/crate_sources.cmake)
set(A2PACK_ZSTD_CRATE_VERSION "2.1.3+zstd.1.5.7")
set(A2PACK_ZSTD_CRATE_SHA256 "f729a06d0257428fd9d997ac8db7e1407bd0262ab016b085b36bc52957c0052d")

set(A2PACK_ZSTD_BUNDLED OFF)
if(A2PACK_BUNDLED_ZSTD)
  # zstd's LICENSE travels with the Python wheel, which ships this build.
  a2pack_fetch_crate(zstd_crate zstd-sys ${A2PACK_ZSTD_CRATE_VERSION} ${A2PACK_ZSTD_CRATE_SHA256}
    "zstd/lib/*" "zstd/LICENSE")
  if(NOT zstd_crate)
    message(WARNING "a2pack: using the system libzstd instead of zstd 1.5.7")
  endif()
  set(zstd_lib "${zstd_crate}/zstd/lib")
  set(A2PACK_ZSTD_LICENSE "${zstd_crate}/zstd/LICENSE")
  if(zstd_crate)
    enable_language(ASM)  # the x86-64 Huffman decoder (huf_decompress_amd64.S)
    file(GLOB zstd_sources "${zstd_lib}/common/*.c" "${zstd_lib}/compress/*.c"
      "${zstd_lib}/decompress/*.c" "${zstd_lib}/decompress/*.S")  # no dictBuilder: nothing trains
    add_library(a2pack_zstd STATIC ${zstd_sources})
    target_include_directories(a2pack_zstd SYSTEM PUBLIC "${zstd_lib}")
    # No legacy formats, no multithreading (a2pack runs its own workers), no
    # symbols of zstd's own in liba2pack's interface.
    target_compile_definitions(a2pack_zstd
      PRIVATE ZSTD_LEGACY_SUPPORT=0 ZSTD_TRACE=0
      PUBLIC ZSTDLIB_VISIBLE= ZSTDERRORLIB_VISIBLE= ZDICTLIB_VISIBLE=)
    set_target_properties(a2pack_zstd PROPERTIES C_VISIBILITY_PRESET hidden
      POSITION_INDEPENDENT_CODE ON)
    target_compile_options(a2pack_zstd PRIVATE $<$<COMPILE_LANGUAGE:C>:-O3>)
    set(A2PACK_ZSTD a2pack_zstd)
    set(A2PACK_ZSTD_BUNDLED ON)
    message(STATUS "a2pack: zstd 1.5.7 built from ${zstd_lib}")
  endif()
endif()
if(NOT A2PACK_ZSTD_BUNDLED)
  find_package(zstd CONFIG QUIET)
  if(TARGET zstd::libzstd_shared)
    set(A2PACK_ZSTD zstd::libzstd_shared)
  else()
    pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
    set(A2PACK_ZSTD PkgConfig::ZSTD)
  endif()
endif()

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

set(A2PACK_ZSTD_CRATE "zstd-sys-2.1.3+zstd.1.5.7")
set(A2PACK_ZSTD_CRATE_SHA256 "f729a06d0257428fd9d997ac8db7e1407bd0262ab016b085b36bc52957c0052d")
set(A2PACK_DEPS_CACHE "${CMAKE_CURRENT_SOURCE_DIR}/.deps" CACHE PATH
  "Where downloaded third-party sources are kept between builds")

function(a2pack_fetch_zstd out_dir)
  set(archive "${A2PACK_DEPS_CACHE}/${A2PACK_ZSTD_CRATE}.crate")
  if(EXISTS "${archive}")
    file(SHA256 "${archive}" have)
    if(NOT have STREQUAL A2PACK_ZSTD_CRATE_SHA256)
      message(WARNING "a2pack: ${archive} has the wrong checksum; fetching it again")
      file(REMOVE "${archive}")
    endif()
  endif()
  if(NOT EXISTS "${archive}")
    string(REPLACE "+" "%2B" name_in_url "${A2PACK_ZSTD_CRATE}")
    set(url "https://static.crates.io/crates/zstd-sys/${name_in_url}.crate")
    file(MAKE_DIRECTORY "${A2PACK_DEPS_CACHE}")
    # Downloaded beside its final name and renamed once verified, so an
    # interrupted download never looks like a good archive.
    set(partial "${archive}.part")
    # (Checked here rather than with EXPECTED_HASH, which turns a failed
    # download into a fatal hash mismatch instead of a fallback.)
    file(DOWNLOAD "${url}" "${partial}" STATUS status TIMEOUT 120 TLS_VERIFY ON)
    list(GET status 0 code)
    list(GET status 1 why)
    if(code EQUAL 0)
      file(SHA256 "${partial}" got)
      if(NOT got STREQUAL A2PACK_ZSTD_CRATE_SHA256)
        set(code -1)
        set(why "SHA-256 ${got}, expected ${A2PACK_ZSTD_CRATE_SHA256}")
      endif()
    endif()
    if(NOT code EQUAL 0)
      file(REMOVE "${partial}")
      message(WARNING "a2pack: could not fetch zstd 1.5.7 sources from ${url} (${why}); "
        "using the system libzstd instead")
      set(${out_dir} "" PARENT_SCOPE)
      return()
    endif()
    file(RENAME "${partial}" "${archive}")
  endif()
  set(deps "${CMAKE_CURRENT_BINARY_DIR}/_deps")
  set(marker "${deps}/${A2PACK_ZSTD_CRATE}.extracted")
  if(NOT EXISTS "${marker}")
    file(REMOVE_RECURSE "${deps}/${A2PACK_ZSTD_CRATE}")
    file(ARCHIVE_EXTRACT INPUT "${archive}" DESTINATION "${deps}"
      PATTERNS "${A2PACK_ZSTD_CRATE}/zstd/lib/*")
    file(TOUCH "${marker}")
  endif()
  set(${out_dir} "${deps}/${A2PACK_ZSTD_CRATE}/zstd/lib" PARENT_SCOPE)
endfunction()

set(A2PACK_ZSTD_BUNDLED OFF)
if(A2PACK_BUNDLED_ZSTD)
  a2pack_fetch_zstd(zstd_lib)
  if(zstd_lib)
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

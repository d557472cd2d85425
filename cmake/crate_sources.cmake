# Third-party C sources fetched as crates.io packages.
#
# Why crates.io: it is a registry every build machine of this project
# reaches, and several crates carry unmodified upstream release trees (zstd in
# zstd-sys, the SQLite amalgamation in libsqlite3-sys). A .crate is a gzipped
# tarball, so CMake fetches it with file(DOWNLOAD), pinned by SHA-256 (the
# checksum in crates.io's index), into a cache beside the sources (.deps/),
# so a checkout downloads it once and later builds - the Python wheel's
# included - work offline.

set(A2PACK_DEPS_CACHE "${CMAKE_CURRENT_SOURCE_DIR}/.deps" CACHE PATH
  "Where downloaded third-party sources are kept between builds")

# a2pack_fetch_crate(<out_var> <crate> <version> <sha256> <pattern>...)
# Extracts the members matching the patterns (relative to the crate's root,
# e.g. "zstd/lib/*") under the build tree and sets <out_var> to the crate's
# extracted root, or to "" (with a warning) when it can be neither found in
# the cache nor downloaded.
function(a2pack_fetch_crate out_var crate version sha256)
  set(stem "${crate}-${version}")
  set(archive "${A2PACK_DEPS_CACHE}/${stem}.crate")
  if(EXISTS "${archive}")
    file(SHA256 "${archive}" have)
    if(NOT have STREQUAL sha256)
      message(WARNING "a2pack: ${archive} has the wrong checksum; fetching it again")
      file(REMOVE "${archive}")
    endif()
  endif()
  if(NOT EXISTS "${archive}")
    string(REPLACE "+" "%2B" name_in_url "${stem}")
    set(url "https://static.crates.io/crates/${crate}/${name_in_url}.crate")
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
      if(NOT got STREQUAL sha256)
        set(code -1)
        set(why "SHA-256 ${got}, expected ${sha256}")
      endif()
    endif()
    if(NOT code EQUAL 0)
      file(REMOVE "${partial}")
      message(WARNING "a2pack: could not fetch ${stem} from ${url} (${why})")
      set(${out_var} "" PARENT_SCOPE)
      return()
    endif()
    file(RENAME "${partial}" "${archive}")
  endif()
  set(deps "${CMAKE_CURRENT_BINARY_DIR}/_deps")
  set(patterns "")
  foreach(p IN LISTS ARGN)
    list(APPEND patterns "${stem}/${p}")
  endforeach()
  # The marker names what was extracted, so asking for more members later
  # extracts again.
  string(SHA1 wanted "${patterns}")
  string(SUBSTRING "${wanted}" 0 12 wanted)
  set(marker "${deps}/${stem}.${wanted}.extracted")
  if(NOT EXISTS "${marker}")
    file(REMOVE_RECURSE "${deps}/${stem}")
    file(ARCHIVE_EXTRACT INPUT "${archive}" DESTINATION "${deps}" PATTERNS ${patterns})
    file(TOUCH "${marker}")
  endif()
  set(${out_var} "${deps}/${stem}" PARENT_SCOPE)
endfunction()

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

# a2pack_download_pinned(<ok_var> <archive> <sha256> <url>...)
# Makes sure <archive> exists with the given SHA-256: kept if the cache has it
# with that checksum, else downloaded from the first URL that gives it.
# Sets <ok_var> to TRUE or FALSE (with a warning naming the URLs tried).
function(a2pack_download_pinned ok_var archive sha256)
  if(EXISTS "${archive}")
    file(SHA256 "${archive}" have)
    if(have STREQUAL sha256)
      set(${ok_var} TRUE PARENT_SCOPE)
      return()
    endif()
    message(WARNING "a2pack: ${archive} has the wrong checksum; fetching it again")
    file(REMOVE "${archive}")
  endif()
  get_filename_component(dir "${archive}" DIRECTORY)
  file(MAKE_DIRECTORY "${dir}")
  # Downloaded beside its final name and renamed once verified, so an
  # interrupted download never looks like a good archive.
  set(partial "${archive}.part")
  set(tried "")
  foreach(url IN LISTS ARGN)
    # (Checked here rather than with EXPECTED_HASH, which turns a failed
    # download into a fatal hash mismatch instead of a fallback.)
    file(DOWNLOAD "${url}" "${partial}" STATUS status TIMEOUT 120 TLS_VERIFY ON)
    list(GET status 0 code)
    list(GET status 1 why)
    if(code EQUAL 0)
      file(SHA256 "${partial}" got)
      if(got STREQUAL sha256)
        file(RENAME "${partial}" "${archive}")
        set(${ok_var} TRUE PARENT_SCOPE)
        return()
      endif()
      set(why "SHA-256 ${got}, expected ${sha256}")
    endif()
    file(REMOVE "${partial}")
    list(APPEND tried "${url} (${why})")
  endforeach()
  list(JOIN tried "; " tried)
  message(WARNING "a2pack: could not fetch ${archive}: ${tried}")
  set(${ok_var} FALSE PARENT_SCOPE)
endfunction()

# a2pack_fetch_crate(<out_var> <crate> <version> <sha256> <pattern>...)
# Extracts the members matching the patterns (relative to the crate's root,
# e.g. "zstd/lib/*") under $A2PACK_DEPS_CACHE/src and sets <out_var> to the crate's
# extracted root, or to "" (with a warning) when it can be neither found in
# the cache nor downloaded.
function(a2pack_fetch_crate out_var crate version sha256)
  set(stem "${crate}-${version}")
  set(archive "${A2PACK_DEPS_CACHE}/${stem}.crate")
  string(REPLACE "+" "%2B" name_in_url "${stem}")
  a2pack_download_pinned(ok "${archive}" "${sha256}"
    "https://static.crates.io/crates/${crate}/${name_in_url}.crate")
  if(NOT ok)
    set(${out_var} "" PARENT_SCOPE)
    return()
  endif()
  # Extracted beside the archive, not into the build tree: every build tree
  # of the checkout (build/, the wheel's, the C-host test's /usr build) then
  # compiles the same source paths with the same -isystem, so ccache serves
  # the second and third build of a configuration from the first.
  set(patterns "")
  foreach(p IN LISTS ARGN)
    list(APPEND patterns "${stem}/${p}")
  endforeach()
  # The folder's name says what was extracted, so asking for more members
  # later extracts again.
  string(SHA1 wanted "${patterns}")
  string(SUBSTRING "${wanted}" 0 12 wanted)
  set(dest "${A2PACK_DEPS_CACHE}/src/${stem}.${wanted}")
  if(NOT EXISTS "${dest}/.extracted")
    # Into a folder of this configure's own, renamed into place when whole:
    # a configure running beside this one never sees a half-extracted tree.
    string(RANDOM LENGTH 8 tag)
    set(tmp "${A2PACK_DEPS_CACHE}/src/.tmp-${stem}-${tag}")
    file(REMOVE_RECURSE "${tmp}")
    file(ARCHIVE_EXTRACT INPUT "${archive}" DESTINATION "${tmp}" PATTERNS ${patterns})
    file(TOUCH "${tmp}/${stem}/.extracted")
    file(RENAME "${tmp}/${stem}" "${dest}" RESULT moved)
    file(REMOVE_RECURSE "${tmp}")
    if(NOT EXISTS "${dest}/.extracted")
      message(FATAL_ERROR "a2pack: could not put ${stem}'s sources at ${dest}: ${moved}")
    endif()
  endif()
  set(${out_var} "${dest}" PARENT_SCOPE)
endfunction()

# fmt, nlohmann-json and CLI11: the three header-only (or header-only-able)
# C++ libraries the library and the CLI compile against.
#
# Where they come from, chosen by A2PACK_HEADER_LIBS:
#   AUTO (default)  the system's (find_package: Debian's libfmt-dev,
#                   nlohmann-json3-dev, libcli11-dev) when found, so normal
#                   development builds are unchanged; otherwise the fetched
#                   copies below. So the sdist builds with nothing but a C++20
#                   compiler, CMake and Python (tests/packaging/check_install.sh
#                   builds it with the system's headers hidden).
#   SYSTEM          the system's or a configure error (the old behaviour).
#   FETCHED         always the fetched copies: cross builds (the manylinux
#                   wheels of scripts/build_manylinux.sh), which must not put
#                   the build machine's /usr/include on the compiler's path.
#
# Where the fetched copies come from, each pinned by SHA-256 and kept in the
# .deps/ cache beside zstd's and SQLite's crates (cmake/crate_sources.cmake):
#   - fmt 9.1.0 and CLI11 2.1.2: Debian's packages (libfmt-dev, libcli11-dev),
#     the versions the system route is tested with on Debian 12. No registry
#     this project reaches carries their release headers as a package of its
#     own, and Debian's archive is one every build machine of this project
#     reaches (apt). A .deb is an `ar` archive holding data.tar.xz, both of
#     which CMake's file(ARCHIVE_EXTRACT) opens; the checksum is the one in
#     Debian's Packages index. The headers are the packages' /usr/include,
#     and Debian's copyright file (the upstream license text) is shipped in
#     the wheel as the library's license. If the pool ever drops a file
#     (Debian moves a release to its archive when it retires it), the second
#     URL is that archive's copy; the checksum makes any source equally good.
#   - nlohmann-json 3.12.0: PyPI's `nlohmann-json` wheel, the release's
#     include/ tree and LICENSE repackaged (a zip, immutable once uploaded).
#     Not Debian 12's 3.11.2: that one does not compile against LLVM's
#     libc++ 19 and later (std::char_traits<unsigned char> is gone), which the
#     manylinux wheels are built with.
#
# fmt is used header-only (FMT_HEADER_ONLY) when fetched: the library then
# needs no libfmt, as the wheel already does with the system's headers.
#
# Sets: A2PACK_FMT (target), A2PACK_FMT_IS_HEADER_ONLY, targets
# nlohmann_json::nlohmann_json and (with the CLI) CLI11::CLI11, and
# A2PACK_<FMT|JSON|CLI11>_LICENSE (a license file, or "").

include(${CMAKE_CURRENT_LIST_DIR}/crate_sources.cmake)

set(A2PACK_HEADER_LIBS AUTO CACHE STRING
  "Where fmt, nlohmann-json and CLI11 come from: AUTO (the system's when found, else fetched), SYSTEM, FETCHED")
set_property(CACHE A2PACK_HEADER_LIBS PROPERTY STRINGS AUTO SYSTEM FETCHED)
if(NOT A2PACK_HEADER_LIBS MATCHES "^(AUTO|SYSTEM|FETCHED)$")
  message(FATAL_ERROR "A2PACK_HEADER_LIBS must be AUTO, SYSTEM or FETCHED, not '${A2PACK_HEADER_LIBS}'")
endif()

# Debian's packages: name, version, pool path, SHA-256.
set(A2PACK_DEB_FMT libfmt-dev 9.1.0+ds1-2 "pool/main/f/fmtlib/libfmt-dev_9.1.0+ds1-2_amd64.deb"
  c8fa00dd0269e6eda9fd06668df3d720de4b5a1f647dcd3c6e0ba63f0cbf2150)
# PyPI's nlohmann-json: version, file path under files.pythonhosted.org, SHA-256.
set(A2PACK_PYPI_JSON 3.12.0
  "packages/51/69/a42fddc89a6de959b65b27a15d69de85e88d2f99884e00b1b02c12dce301/nlohmann_json-3.12.0-py3-none-any.whl"
  5f6132720fb25d0d70bf0742f8397b49a540dcc193e7312a914f6aa49f054810)
set(A2PACK_DEB_CLI11 libcli11-dev 2.1.2+ds-1 "pool/main/c/cli11/libcli11-dev_2.1.2+ds-1_all.deb"
  f1f6ee9ec053e0e0bcec47345e241b6a8ee006321248b4329e9ce88d2b4b64a8)

# a2pack_fetch_deb(<out_var> <name> <version> <pool path> <sha256>)
# Extracts the package's usr/include and its copyright file under the build
# tree and sets <out_var> to the extracted root (the folder holding usr/),
# or to "" (with a warning) when it can be neither found in the cache nor
# downloaded. (The .deb names its architecture, but only headers are taken.)
function(a2pack_fetch_deb out_var name version pool sha256)
  get_filename_component(file_name "${pool}" NAME)
  set(archive "${A2PACK_DEPS_CACHE}/${file_name}")
  a2pack_download_pinned(ok "${archive}" "${sha256}"
    "https://deb.debian.org/debian/${pool}" "https://archive.debian.org/debian/${pool}")
  if(NOT ok)
    set(${out_var} "" PARENT_SCOPE)
    return()
  endif()
  set(root "${CMAKE_CURRENT_BINARY_DIR}/_deps/${name}-${version}")
  set(marker "${root}.extracted")
  if(NOT EXISTS "${marker}")
    file(REMOVE_RECURSE "${root}" "${root}.ar")
    file(ARCHIVE_EXTRACT INPUT "${archive}" DESTINATION "${root}.ar")
    file(GLOB data "${root}.ar/data.tar.*")
    if(NOT data)
      message(WARNING "a2pack: ${archive} holds no data.tar.*")
      set(${out_var} "" PARENT_SCOPE)
      return()
    endif()
    file(ARCHIVE_EXTRACT INPUT "${data}" DESTINATION "${root}"
      PATTERNS "./usr/include/*" "./usr/share/doc/${name}/copyright")
    file(REMOVE_RECURSE "${root}.ar")
    file(TOUCH "${marker}")
  endif()
  set(${out_var} "${root}" PARENT_SCOPE)
endfunction()

# a2pack_fetch_json_wheel(<out_var>): PyPI's nlohmann-json wheel, extracted;
# <out_var> is the folder holding nlohmann/ (or "" with a warning).
function(a2pack_fetch_json_wheel out_var)
  list(GET A2PACK_PYPI_JSON 0 version)
  list(GET A2PACK_PYPI_JSON 1 path)
  list(GET A2PACK_PYPI_JSON 2 sha256)
  get_filename_component(file_name "${path}" NAME)
  set(archive "${A2PACK_DEPS_CACHE}/${file_name}")
  a2pack_download_pinned(ok "${archive}" "${sha256}" "https://files.pythonhosted.org/${path}")
  if(NOT ok)
    set(${out_var} "" PARENT_SCOPE)
    return()
  endif()
  set(root "${CMAKE_CURRENT_BINARY_DIR}/_deps/nlohmann_json-${version}")
  if(NOT EXISTS "${root}.extracted")
    file(REMOVE_RECURSE "${root}")
    file(ARCHIVE_EXTRACT INPUT "${archive}" DESTINATION "${root}"
      PATTERNS "nlohmann_json/include/nlohmann/*" "nlohmann_json-${version}.dist-info/licenses/LICENSE*")
    file(TOUCH "${root}.extracted")
  endif()
  set(${out_var} "${root}" PARENT_SCOPE)
endfunction()

# a2pack_fetched_header_lib(<var> <list of A2PACK_DEB_*> <what>): fetch one, or stop.
macro(a2pack_fetched_header_lib var list what)
  a2pack_fetch_deb(${var} ${${list}})
  if(NOT ${var})
    list(GET ${list} 0 _pkg)
    message(FATAL_ERROR "a2pack: ${what} was not found on this system and could not be fetched: "
      "install it (Debian: ${_pkg}; or see README, 'Installing') or make Debian's archive reachable")
  endif()
  list(GET ${list} 0 _pkg)
  list(GET ${list} 1 _ver)
  message(STATUS "a2pack: ${what} headers fetched (Debian's ${_pkg} ${_ver}), not the system's: ${${var}}")
endmacro()

# The license of a system package, where Debian keeps it.
function(a2pack_system_license var pkg)
  set(f "/usr/share/doc/${pkg}/copyright")
  if(EXISTS "${f}")
    set(${var} "${f}" PARENT_SCOPE)
  else()
    set(${var} "" PARENT_SCOPE)
  endif()
endfunction()

set(_a2pack_find QUIET)
if(A2PACK_HEADER_LIBS STREQUAL "SYSTEM")
  set(_a2pack_find REQUIRED)
endif()

# ---- fmt
if(NOT A2PACK_HEADER_LIBS STREQUAL "FETCHED")
  find_package(fmt ${_a2pack_find})
endif()
if(fmt_FOUND AND NOT A2PACK_HEADER_LIBS STREQUAL "FETCHED")
  if(A2PACK_FMT_HEADER_ONLY)
    set(A2PACK_FMT fmt::fmt-header-only)
  else()
    set(A2PACK_FMT fmt::fmt)
  endif()
  set(A2PACK_FMT_IS_HEADER_ONLY ${A2PACK_FMT_HEADER_ONLY})
  a2pack_system_license(A2PACK_FMT_LICENSE libfmt-dev)
else()
  a2pack_fetched_header_lib(fmt_root A2PACK_DEB_FMT "fmt")
  add_library(a2pack_fetched_fmt INTERFACE)
  target_include_directories(a2pack_fetched_fmt SYSTEM INTERFACE "${fmt_root}/usr/include")
  target_compile_definitions(a2pack_fetched_fmt INTERFACE FMT_HEADER_ONLY=1)
  set(A2PACK_FMT a2pack_fetched_fmt)
  set(A2PACK_FMT_IS_HEADER_ONLY ON)
  set(A2PACK_FMT_LICENSE "${fmt_root}/usr/share/doc/libfmt-dev/copyright")
endif()

# ---- nlohmann-json
if(NOT A2PACK_HEADER_LIBS STREQUAL "FETCHED")
  find_package(nlohmann_json ${_a2pack_find})
endif()
if(nlohmann_json_FOUND AND NOT A2PACK_HEADER_LIBS STREQUAL "FETCHED")
  a2pack_system_license(A2PACK_JSON_LICENSE nlohmann-json3-dev)
else()
  a2pack_fetch_json_wheel(json_root)
  list(GET A2PACK_PYPI_JSON 0 json_version)
  if(NOT json_root)
    message(FATAL_ERROR "a2pack: nlohmann-json was not found on this system and could not be fetched: "
      "install it (Debian: nlohmann-json3-dev) or make PyPI reachable")
  endif()
  message(STATUS "a2pack: nlohmann-json headers fetched (PyPI's nlohmann-json ${json_version}), "
    "not the system's: ${json_root}")
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  target_include_directories(nlohmann_json::nlohmann_json SYSTEM INTERFACE "${json_root}/nlohmann_json/include")
  set(A2PACK_JSON_LICENSE "${json_root}/nlohmann_json-${json_version}.dist-info/licenses/LICENSE")
endif()

# ---- CLI11 (the command-line tool only)
set(A2PACK_CLI11_LICENSE "")
if(A2PACK_BUILD_CLI)
  if(NOT A2PACK_HEADER_LIBS STREQUAL "FETCHED")
    find_package(CLI11 CONFIG ${_a2pack_find})
  endif()
  if(CLI11_FOUND AND NOT A2PACK_HEADER_LIBS STREQUAL "FETCHED")
    a2pack_system_license(A2PACK_CLI11_LICENSE libcli11-dev)
  else()
    a2pack_fetched_header_lib(cli11_root A2PACK_DEB_CLI11 "CLI11")
    add_library(CLI11::CLI11 INTERFACE IMPORTED)
    target_include_directories(CLI11::CLI11 SYSTEM INTERFACE "${cli11_root}/usr/include")
    set(A2PACK_CLI11_LICENSE "${cli11_root}/usr/share/doc/libcli11-dev/copyright")
  endif()
endif()

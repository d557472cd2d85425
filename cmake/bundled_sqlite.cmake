# SQLite for the library: the system's libsqlite3 (Debian's libsqlite3-dev)
# by default; the amalgamation built into liba2pack (static, hidden) when
# A2PACK_BUNDLED_SQLITE is ON, as the Python wheel does so that it needs
# nothing beyond glibc (Debian's libsqlite3.a is not position-independent, so
# it cannot go into a shared library).
#
# Where the amalgamation comes from: the `libsqlite3-sys` crate on crates.io
# carries SQLite's unmodified sqlite3.c/sqlite3.h (3.46.0 in 0.30.1), fetched
# and pinned like zstd (cmake/crate_sources.cmake). SQLite is in the public
# domain.
#
# Sets A2PACK_SQLITE to the target to link.

option(A2PACK_BUNDLED_SQLITE "Build the SQLite amalgamation into the library instead of linking the system libsqlite3" OFF)
set(A2PACK_SQLITE_CRATE_VERSION "0.30.1")
set(A2PACK_SQLITE_CRATE_SHA256 "2e99fb7a497b1e3339bc746195567ed8d3e24945ecd636e3619d20b9de9e9149")

set(A2PACK_SQLITE "")
if(A2PACK_BUNDLED_SQLITE)
  include(${CMAKE_CURRENT_LIST_DIR}/crate_sources.cmake)
  a2pack_fetch_crate(sqlite_crate libsqlite3-sys ${A2PACK_SQLITE_CRATE_VERSION}
    ${A2PACK_SQLITE_CRATE_SHA256} "sqlite3/sqlite3.c" "sqlite3/sqlite3.h")
  if(sqlite_crate)
    add_library(a2pack_sqlite STATIC "${sqlite_crate}/sqlite3/sqlite3.c")
    target_include_directories(a2pack_sqlite SYSTEM PUBLIC "${sqlite_crate}/sqlite3")
    # Serialized threading as Debian builds it; no extension loading (nothing
    # loads one, and it would need libdl at run time).
    target_compile_definitions(a2pack_sqlite PRIVATE SQLITE_THREADSAFE=1
      SQLITE_OMIT_LOAD_EXTENSION SQLITE_DEFAULT_MEMSTATUS=0)
    set_target_properties(a2pack_sqlite PROPERTIES C_VISIBILITY_PRESET hidden
      POSITION_INDEPENDENT_CODE ON)
    target_compile_options(a2pack_sqlite PRIVATE -w)
    target_link_libraries(a2pack_sqlite PUBLIC Threads::Threads m)
    set(A2PACK_SQLITE a2pack_sqlite)
    message(STATUS "a2pack: SQLite amalgamation built from ${sqlite_crate}")
  else()
    message(WARNING "a2pack: using the system libsqlite3 instead of the bundled amalgamation")
  endif()
endif()
if(NOT A2PACK_SQLITE)
  find_package(SQLite3 REQUIRED)
  set(A2PACK_SQLITE SQLite::SQLite3)
endif()

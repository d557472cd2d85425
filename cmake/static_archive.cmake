# cmake -P script: turn the shared library's objects into one static archive
# that a program can link instead of liba2pack.so (the Rust crates do, so a
# program depending on them runs without the library on the loader's path).
#
# The objects, bundled zstd/SQLite and liburing are linked into one
# relocatable object (ld -r) whose only global symbols are the a2pack_*
# functions: everything else is made local, as the shared library's version
# script does, so a program that also links its own zstd or SQLite gets no
# clash. Inputs (-D): OUT (the .a), INPUTS (a file: objects one per line,
# a line "--archives", then static archives), LD, OBJCOPY, NM, AR.
cmake_minimum_required(VERSION 3.25)
get_filename_component(out_dir "${OUT}" DIRECTORY)
set(prelinked "${out_dir}/a2pack_static_prelinked.o")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "a2pack static archive: `${ARGN}` failed (${rc}): ${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

file(STRINGS "${INPUTS}" lines)
set(OBJECTS "")
set(ARCHIVES "")
set(list OBJECTS)
foreach(line IN LISTS lines)
  if(line STREQUAL "--archives")
    set(list ARCHIVES)
  elseif(NOT line STREQUAL "")
    list(APPEND ${list} "${line}")
  endif()
endforeach()
set(archives "")
if(ARCHIVES)
  set(archives --whole-archive ${ARCHIVES} --no-whole-archive)
endif()
run(${LD} -r -o "${prelinked}" ${OBJECTS} ${archives})
# Hidden symbols (everything but the exported API: CMake's visibility preset)
# become local first; then any other strong global (liburing's, which is
# built without hidden visibility). Weak symbols (C++ inline functions and
# templates) stay weak: duplicates of them are merged by any linker.
run(${OBJCOPY} --localize-hidden "${prelinked}")
run(${NM} --defined-only --extern-only "${prelinked}")
string(REPLACE "\n" ";" lines "${run_output}")
set(localize "")
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9a-fA-F]* ([A-Za-z]) (.+)$")
    set(kind "${CMAKE_MATCH_1}")
    set(name "${CMAKE_MATCH_2}")
    if(NOT kind MATCHES "^[WVu]$" AND NOT name MATCHES "^a2pack_")
      string(APPEND localize "${name}\n")
    endif()
  endif()
endforeach()
file(WRITE "${out_dir}/a2pack_static_localize.txt" "${localize}")
run(${OBJCOPY} --localize-symbols=${out_dir}/a2pack_static_localize.txt "${prelinked}")
file(REMOVE "${OUT}")
run(${AR} rcs "${OUT}" "${prelinked}")
file(REMOVE "${prelinked}")

"""Where the tests find the `a2pack` command-line tool: $A2PACK_CLI (make
test sets it to the build's), else the tool beside the library the package
loaded (a build folder holds both)."""

import os
import pathlib

import a2pack


def cli_path() -> pathlib.Path:
    env = os.environ.get("A2PACK_CLI")
    if env:
        return pathlib.Path(env)
    return pathlib.Path(a2pack.library_path).resolve().parent / "a2pack"


def cli_of_loaded_library() -> pathlib.Path:
    """The `a2pack` tool built with the very library this process loaded: the
    one bundled in the installed package (a2pack/_bin), else the one beside
    the library (a build folder), else cli_path(). For byte-for-byte
    comparisons of files that embed the library's own SQLite: a wheel bundles
    SQLite while a development build may link the system's, and two SQLite
    versions may lay out the same database differently."""
    lib = pathlib.Path(a2pack.library_path).resolve()
    package = pathlib.Path(a2pack.__file__).resolve().parent
    bundled = package / "_bin" / "a2pack"
    if bundled.is_file() and lib.parent == package:
        return bundled
    beside = lib.parent / "a2pack"
    if beside.is_file():
        return beside
    return cli_path()


CLI = cli_path()

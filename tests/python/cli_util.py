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


CLI = cli_path()

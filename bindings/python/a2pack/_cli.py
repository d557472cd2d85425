"""The `a2pack` console script: runs the C++ command-line tool shipped in the
wheel (a2pack/_bin/a2pack) with the same arguments.

The tool's Python-backed commands (`log to-parquet`, ...) run in the
interpreter this script runs in, so they find this package and pyarrow
wherever pip put them.
"""

from __future__ import annotations

import os
import pathlib
import sys

_HERE = pathlib.Path(__file__).resolve().parent


def binary_path() -> pathlib.Path:
    """Where the bundled tool is; FileNotFoundError when this install has none
    (a package built without the CLI, e.g. an editable checkout)."""
    exe = _HERE / "_bin" / "a2pack"
    if not exe.is_file():
        raise FileNotFoundError(
            f"a2pack: the command-line tool is not bundled in this install ({exe}); "
            "build it from the repository (make build) or install the wheel")
    return exe


def status(message: str, quiet: bool = False) -> None:
    """A status line of a command ("wrote ..."), or a warning: on stderr, so
    stdout carries only data; silenced by ``quiet`` or by the tool's -q
    (which sets A2PACK_QUIET for the Python-backed commands)."""
    if not quiet and not os.environ.get("A2PACK_QUIET"):
        print(message, file=sys.stderr)


def main() -> None:
    try:
        exe = binary_path()
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        sys.exit(127)
    env = dict(os.environ)
    env.setdefault("A2PACK_PYTHON", sys.executable)
    os.execve(str(exe), [str(exe), *sys.argv[1:]], env)


if __name__ == "__main__":
    main()

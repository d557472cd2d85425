"""Hostile filesystems for the tests of writers: symbolic links planted where
a writer will create its temporary and final files, a small filesystem that
fills up, and the check that nothing outside the writer's folder changed.

Every writer makes its file under a temporary name beside it,
"<final>.tmp-<pid>-<n>", and renames it into place. Someone who may write
into the output folder (a shared scratch folder, a dataset folder of another
user) can guess those names and plant links there pointing anywhere; a writer
that opens its temporary without O_EXCL | O_NOFOLLOW then truncates and
overwrites the link's target, or creates it when the link dangles. The tests
plant such links for the writer's own pid (start_paused() tells a command's
pid before it runs) and check with snapshot() and
assert_nothing_written_outside() that the targets kept their bytes and the
dangling ones stayed absent.

    outside = tmp_path / "outside"
    victim, missing = make_victims(outside)
    before = snapshot(outside)
    p, release = start_paused([CLI, "extract", ...])
    plant_links_at_temp_names(folder, "run-000000.a2run2", victim, pids=[p.pid])
    plant_links_at_temp_names(folder, "run-000001.a2run2", missing, pids=[p.pid])
    out, err = release()
    assert_nothing_written_outside(outside, before)
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import uuid
from typing import Iterable, Iterator, Sequence

import pytest

VICTIM_BYTES = b"bytes a writer must never touch\n"


def temp_names(final_name: str, pids: Iterable[int], counters: Iterable[int] = range(16)) -> list[str]:
    """The temporary names "<final_name>.tmp-<pid>-<n>" a writer of
    `final_name` may use, for every pid and counter given."""
    counters = list(counters)
    return [f"{final_name}.tmp-{pid}-{n}" for pid in pids for n in counters]


def plant_links_at_temp_names(folder, final_name: str, target, pids: Iterable[int] | None = None,
                              counters: Iterable[int] = range(16)) -> list[pathlib.Path]:
    """Symbolic links folder/<final_name>.tmp-<pid>-<n> -> `target` for each
    pid (default: this process's) and counter. `target` may exist (a writer
    following the link would overwrite it) or not (it would create it).
    Returns the links planted."""
    folder = pathlib.Path(folder)
    pids = [os.getpid()] if pids is None else list(pids)
    links = []
    for name in temp_names(final_name, pids, counters):
        link = folder / name
        os.symlink(os.fspath(target), link)
        links.append(link)
    return links


def plant_link(path, target) -> pathlib.Path:
    """One symbolic link `path` -> `target` (a final name, a lock file, a
    subfolder)."""
    path = pathlib.Path(path)
    os.symlink(os.fspath(target), path)
    return path


def make_victims(outside) -> tuple[pathlib.Path, pathlib.Path]:
    """A folder standing for everything outside the writer's folder: returns
    (an existing file holding VICTIM_BYTES, a path that does not exist)."""
    outside = pathlib.Path(outside)
    outside.mkdir(parents=True, exist_ok=True)
    victim = outside / "victim.txt"
    victim.write_bytes(VICTIM_BYTES)
    return victim, outside / "must-not-appear"


def snapshot(root) -> dict[str, tuple]:
    """Every entry under `root` (links not followed): relative path -> ("file",
    bytes) | ("link", target) | ("dir",)."""
    root = pathlib.Path(root)
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = pathlib.Path(dirpath) / name
            rel = os.fspath(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir",)
            else:
                out[rel] = ("file", p.read_bytes())
    return out


def assert_nothing_written_outside(outside, before: dict[str, tuple]) -> None:
    """Fails naming each entry under `outside` that appeared, went or changed
    since snapshot(outside) returned `before`."""
    now = snapshot(outside)
    changes = []
    for rel in sorted(set(before) | set(now)):
        if rel not in now:
            changes.append(f"{rel}: removed")
        elif rel not in before:
            changes.append(f"{rel}: created ({now[rel][0]})")
        elif now[rel] != before[rel]:
            changes.append(f"{rel}: changed")
    assert not changes, f"written outside {outside}: " + "; ".join(changes)


def links_left(folder) -> list[str]:
    """Names of the symbolic links in `folder` (a writer may leave the links
    it refused; it must not leave its own temporaries)."""
    return sorted(e.name for e in os.scandir(folder) if e.is_symlink())


def start_paused(argv: Sequence, **popen_kw):
    """Start command `argv` with its pid known before it runs: a shell that
    waits for one line on stdin and then execs the command (same pid).
    Returns (the Popen, release); release() lets it run and returns
    communicate()'s (stdout, stderr); the exit status is in Popen.returncode."""
    popen_kw.setdefault("stdout", subprocess.PIPE)
    popen_kw.setdefault("stderr", subprocess.PIPE)
    p = subprocess.Popen(["sh", "-c", 'read _ && exec "$0" "$@"', *map(os.fspath, argv)],
                         stdin=subprocess.PIPE, **popen_kw)

    def release(timeout: float = 120):
        return p.communicate(b"go\n", timeout=timeout)

    return p, release


@contextlib.contextmanager
def small_tmpfs(path, size: str = "1m") -> Iterator[pathlib.Path]:
    """A tmpfs of `size` mounted at `path` for the duration: a filesystem
    that really fills up (ENOSPC). Skips the test where mounting is not
    permitted (not root, no CAP_SYS_ADMIN, a container that forbids it)."""
    path = pathlib.Path(path)
    path.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}",
                        f"a2pack-test-{uuid.uuid4().hex[:8]}", os.fspath(path)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {p.stderr.strip() or p.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", os.fspath(path)], capture_output=True)


def fill_up(folder, leave: int = 0) -> pathlib.Path:
    """Fill the filesystem holding `folder` up to `leave` free bytes (about:
    a filesystem counts in blocks) with one file, returned."""
    folder = pathlib.Path(folder)
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    filler = folder / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free - leave))
    return filler

"""Shared by the live feed tests (test_feed_live.py, test_feed_live_shards.py):
runs to append, batches taken as plain arrays, and an appending process."""
import os
import signal
import subprocess
import sys

import numpy as np

import a2pack
from beam_ddp_helpers import make_run


def runs(first, count):
    return [make_run(first + k, 40 + (first + k) * 7 % 50) for k in range(count)]


def built(tmp_path, name, count, **build):
    """A dataset tmp_path/name built from runs(0, count) saved in tmp_path/runs
    (build: build_dataset's options)."""
    (tmp_path / "runs").mkdir()
    for k, r in enumerate(runs(0, count)):
        r.save(tmp_path / "runs" / f"run-{k:03d}.a2run2")
    a2pack.build_dataset(tmp_path / "runs", tmp_path / name, workers=1, **build)
    return tmp_path / name


def take(f, n):
    """The next n batches of feed f, each copied out of the ring."""
    out = []
    for _ in range(n):
        b = next(f)
        out.append({"epoch": b.epoch, "batch": b.batch,
                    **{k: np.array(b[k]) for k in b.keys()}})
    return out


def same(a, b):
    assert [(x["epoch"], x["batch"]) for x in a] == [(y["epoch"], y["batch"]) for y in b]
    for x, y in zip(a, b):
        assert np.array_equal(x["indices"], y["indices"])


# Appends `count` rounds of 10 runs to the dataset, printing each round's
# number once it has committed: python appender.py DS FIRST_SEED COUNT.
APPENDER = r"""
import sys
import a2pack
from beam_ddp_helpers import make_run
ds, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for k in range(count):
    a2pack.append_runs(ds, [make_run(first + 10 * k + j, 60 + j) for j in range(10)])
    print(k, flush=True)
"""


class Appender:
    """Another process appending to a dataset (the script above, written to
    tmp_path, importing this folder's helpers)."""

    def __init__(self, tmp_path, ds_dir):
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.dirname(__file__)] + [p for p in sys.path if p]))
        self.script = tmp_path / "appender.py"
        self.script.write_text(APPENDER)
        self.ds_dir = ds_dir

    def start(self, first, count):
        return subprocess.Popen([sys.executable, str(self.script), str(self.ds_dir), str(first),
                                 str(count)], env=self.env, stdout=subprocess.PIPE, text=True)

    def kill_mid_append(self):
        """Start one, and SIGKILL it as soon as its first append has
        committed: the next is under way."""
        proc = self.start(5000, 50)
        proc.stdout.readline()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)

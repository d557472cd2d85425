"""The 2048 engine: play games and write run files."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Optional, Union

from ._native import check, ffi, fspath, lib
from .run import RunV2, _kind_code

_POLICIES = {"expectimax": lib.A2PACK_POLICY_EXPECTIMAX, "greedy": lib.A2PACK_POLICY_GREEDY,
             "random": lib.A2PACK_POLICY_RANDOM}


@dataclasses.dataclass
class GenOptions:
    policy: str = "expectimax"
    depth: int = 2
    format: str = "v2"
    jobs: int = 0
    start_unix_s: Optional[int] = None
    max_steps: int = 0

    def _to_c(self) -> Any:  # a cffi `a2pack_gen_options *`
        o = ffi.new("a2pack_gen_options *")
        lib.a2pack_gen_options_init(o)
        if self.policy not in _POLICIES:
            raise ValueError(f"policy must be one of {sorted(_POLICIES)}, not {self.policy!r}")
        o.policy = _POLICIES[self.policy]
        o.depth = self.depth
        o.format = _kind_code(self.format)
        o.jobs = self.jobs
        if self.start_unix_s is not None:
            o.start_unix_s = self.start_unix_s
        o.max_steps = self.max_steps
        return o


def generate_run(seed: int, options: Optional[GenOptions] = None, **kw: Any) -> RunV2:
    """Play one game (same seed and options → same run)."""
    opts = (options or GenOptions(**kw))._to_c()
    out = ffi.new("a2pack_run **")
    check(lib.a2pack_gen_run(opts, seed, out))
    return RunV2._adopt(out[0])


def generate_dir(out_dir: Union[str, os.PathLike[str]], runs: int, seed: int = 0,
                 options: Optional[GenOptions] = None,
                 progress: Optional[Callable[[int, int], Optional[bool]]] = None, **kw: Any) -> None:
    """Play `runs` games into out_dir/run-NNNNNN.a2run2. `progress(done,
    total)` may return False to stop (raises InterruptedError_)."""
    opts = (options or GenOptions(**kw))._to_c()
    cb: Any = ffi.NULL
    if progress is not None:
        def on_progress(_user: Any, done: int, total: int) -> int:
            return 1 if progress(int(done), int(total)) is False else 0
        cb = ffi.callback("int(void *, uint64_t, uint64_t)")(on_progress)
    check(lib.a2pack_gen_dir(opts, fspath(out_dir), runs, seed, cb, ffi.NULL))

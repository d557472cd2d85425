"""``python -m a2pack.to_parquet IN OUT``: a packfile or dataset folder as
Parquet (what ``a2pack to-parquet`` runs).

IN is a packfile (one row per run, or per step with ``--layout steps``, the
``entry`` column naming the pack entry) or a dataset folder (steps: the
dataset's rows; runs: its ``runs`` table). The file is written under a
temporary name and renamed when complete. Progress goes to stderr when it is
a terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional

Progress = Optional[Callable[[int, int], None]]


def _progress(enabled: bool) -> Progress:
    if not enabled:
        return None
    start = time.monotonic()

    def show(done: int, total: int) -> None:
        frac = done / total if total else 1.0
        bar = "#" * int(frac * 30)
        sys.stderr.write(f"\rto-parquet [{bar:<30}] {done}/{total} "
                         f"{time.monotonic() - start:6.1f}s")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()
    return show


def convert(inp: str, out: str, *, layout: str = "steps", row_group_size: int = 1 << 20,
            run_ids: Optional[List[int]] = None, min_score: Optional[int] = None,
            max_score: Optional[int] = None, progress: Progress = None) -> int:
    """Write IN as Parquet; returns the rows written."""
    from .dataset import Dataset
    from .pack import PackReader
    from . import arrow

    score = None if min_score is None and max_score is None else (min_score, max_score)
    if os.path.isdir(inp):
        ds = Dataset(inp, mmap=True)
        kw: Dict[str, Any] = {}
        if run_ids is not None:
            kw["run_ids"] = run_ids
        if score is not None:
            kw["score"] = score
        return int(arrow.dataset_to_parquet(ds, out, layout, row_group_size=row_group_size,
                                            progress=progress, **kw))
    pack = PackReader(inp)
    return int(arrow.pack_to_parquet(pack, out, layout, row_group_size=row_group_size,
                                     progress=progress, entries=run_ids, score=score))


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="a2pack to-parquet", description=__doc__.split("\n\n")[0])
    p.add_argument("input", help="packfile or dataset folder")
    p.add_argument("out", help="output .parquet file")
    p.add_argument("--layout", choices=("steps", "runs"), default="steps")
    p.add_argument("--row-group-size", type=int, default=1 << 20)
    p.add_argument("--run-ids", help="comma-separated run ids (dataset) or entries (pack)")
    p.add_argument("--min-score", type=int)
    p.add_argument("--max-score", type=int)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (docs/cli.md)")
    args = p.parse_args(argv)
    from .errors import Error

    ids = [int(x) for x in args.run_ids.split(",") if x] if args.run_ids else None
    try:
        rows = convert(args.input, args.out, layout=args.layout,
                       row_group_size=args.row_group_size, run_ids=ids,
                       min_score=args.min_score, max_score=args.max_score,
                       progress=_progress(not args.quiet and sys.stderr.isatty()))
    except (Error, OSError, ValueError) as e:
        print(f"a2pack: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"input": args.input, "output": args.out, "layout": args.layout,
                          "rows": rows, "bytes": os.path.getsize(args.out)}, indent=2))
        return 0
    from ._cli import status

    status(f"wrote {rows} rows ({args.layout}) to {args.out}", args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())

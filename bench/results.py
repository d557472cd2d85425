"""One line per measured cell, shared by every benchmark script, so that
`make bench` can end with one table of ratios (bench/summary.py).

Each call appends a JSON line to $BENCH_OUT/results.jsonl (bench-out/ by
default). A ratio is always "how many times better a2pack is": baseline /
a2pack for times, a2pack / baseline for rates.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Optional

_OUT = pathlib.Path(os.environ.get("BENCH_OUT", pathlib.Path(__file__).resolve().parents[1] / "bench-out"))


def emit(benchmark: str, cell: str, a2pack: float, baseline_name: str, baseline: Optional[float], unit: str,
         *, higher_is_better: bool = True, target: Optional[float] = None, note: str = "",
         bound: Optional[float] = None, bound_name: str = "") -> None:
    """Record one cell. `unit` names what the figures count ("records/s",
    "s", "us/batch"...); `target` is the ratio the project aims for;
    `bound` is what the hardware or a shared library allows for the same
    work, measured in the same run (`bound_name` says what), in the unit of
    the figures: the summary shows how close a2pack comes to it."""
    if baseline and a2pack:
        ratio = a2pack / baseline if higher_is_better else baseline / a2pack
    else:
        ratio = None
    _OUT.mkdir(parents=True, exist_ok=True)
    line = {"benchmark": benchmark, "cell": cell, "a2pack": a2pack, "baseline_name": baseline_name,
            "baseline": baseline, "unit": unit, "ratio": ratio, "target": target, "note": note}
    if bound and a2pack:
        line["bound_name"] = bound_name
        line["of_bound"] = a2pack / bound if higher_is_better else bound / a2pack
    with open(_OUT / "results.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")

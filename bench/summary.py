"""Write bench-out/summary.md: every benchmark cell of this `make bench` run
(bench-out/results.jsonl, written by bench/results.py), with a2pack's figure,
its baseline, the ratio and the target, and the machine and date.

Usage: summary.py [BENCH_OUT]
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import sys


def machine() -> str:
    model = ""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{model or platform.processor()}, {os.cpu_count()} CPUs, {mem:.0f} GiB, {platform.platform()}"


def fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float) and abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def main() -> int:
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "bench-out")
    src = out / "results.jsonl"
    rows = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if src.exists() else []
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# a2pack benchmarks — {when}", "", f"Machine: {machine()}", "",
             "Ratio: how many times better a2pack is than the baseline (rates: a2pack/baseline; "
             "times: baseline/a2pack). Met: ratio ≥ target. Of bound: a2pack's figure as a share "
             "of what the disk or zstd alone does for the same work in the same run (bench/bag_compare.py "
             "says how each is measured).", ""]
    if not rows:
        lines.append("No results were recorded (bench-out/results.jsonl is missing).")
    met = behind = 0
    for bench in dict.fromkeys(r["benchmark"] for r in rows):
        lines += [f"## {bench}", "",
                  "| cell | a2pack | baseline | baseline figure | unit | ratio | target | met | of bound |",
                  "|---|---:|---|---:|---|---:|---:|---|---:|"]
        for r in (r for r in rows if r["benchmark"] == bench):
            ok = ""
            if r["target"] is not None and r["ratio"] is not None:
                ok = "yes" if r["ratio"] >= r["target"] else "**no**"
                met += ok == "yes"
                behind += ok != "yes"
            ratio = f"{r['ratio']:.2f}×" if r["ratio"] is not None else "—"
            target = f"≥ {r['target']:.2f}×" if r["target"] is not None else ""
            cell = r["cell"] + (f" ({r['note']})" if r.get("note") else "")
            of_bound = f"{100 * r['of_bound']:.0f} %" if r.get("of_bound") else ""
            lines.append(f"| {cell} | {fmt(r['a2pack'])} | {r['baseline_name']} | {fmt(r['baseline'])} | "
                         f"{r['unit']} | {ratio} | {target} | {ok} | {of_bound} |")
        lines.append("")
    lines.append(f"Cells with a target: {met} met, {behind} behind.")
    (out / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

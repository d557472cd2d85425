"""A visual report of a packfile, dataset or logger folder: one self-contained
HTML file (``a2pack report IN -o report.html``, or :func:`write_report`).

Plots are drawn by matplotlib and inlined as SVG; the board replay is a few
lines of inline JavaScript over the runs' boards. Nothing is fetched when the
file is viewed. In a notebook the same plots are matplotlib figures::

    from a2pack import report
    data = report.load("runs.a2pack")
    figs = report.figures(data)          # {"score": Figure, ...}
    figs["score"]                        # shows inline
    report.replay(data, run=3)           # HTML board replay (IPython display)

Needs matplotlib (the ``report`` extra).
"""

from __future__ import annotations

import argparse
import dataclasses
import html
import io
import json
import os
import sqlite3
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

PathLike = Union[str, "os.PathLike[str]"]
MOVE_NAMES = ("up", "down", "left", "right")  # the UDLR order of moves and ev_values
# Steps kept for the step-level plots (moves, legal counts, EV values); more
# are sampled evenly, so a report of a huge dataset stays quick and small.
STEP_SAMPLE = 2_000_000
REPLAY_MAX_STEPS = 20_000


@dataclasses.dataclass
class Replay:
    title: str
    boards: np.ndarray       # uint64, board before each step
    moves: np.ndarray        # uint8
    ev: np.ndarray           # float32 (n, 4)
    legal: np.ndarray        # uint8 masks
    final_board: Optional[int] = None


@dataclasses.dataclass
class ReportData:
    """What the plots are made of (see :func:`load`)."""
    kind: str                                   # "pack", "dataset" or "log"
    source: str
    run_ids: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))  # per run
    scores: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.uint64))
    lengths: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    highest: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.uint32))
    engines: List[str] = dataclasses.field(default_factory=list)
    moves: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.uint8))  # per step
    legal: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.uint8))
    ev: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 4), np.float32))
    total_steps: int = 0
    replays: List[Replay] = dataclasses.field(default_factory=list)
    log: Any = None                             # LogData for kind == "log"


# ------------------------------------------------------------------ loading
def _replay_choice(scores: np.ndarray, wanted: Optional[Sequence[int]]) -> List[int]:
    if wanted:
        return [int(r) for r in wanted]
    if scores.size == 0:
        return []
    order = np.argsort(scores, kind="stable")
    picks = [int(order[-1]), int(order[len(order) // 2]), int(order[0])]
    return list(dict.fromkeys(picks))


def _sample(n: int, cap: int) -> Optional[np.ndarray]:
    return None if n <= cap else np.linspace(0, n - 1, cap).astype(np.int64)


def _load_pack(path: str, replay_runs: Optional[Sequence[int]]) -> ReportData:
    from .pack import PackReader

    pack = PackReader(path)
    n = len(pack)
    d = ReportData("pack", path, run_ids=np.arange(n))
    scores, lengths, highest, engines = [], [], [], []
    moves, legal, ev = [], [], []
    kept = 0
    for start in range(0, n, 1024):
        b = pack.decode_batch_columns(range(start, min(n, start + 1024)))
        scores.append(b.max_score.copy())
        lengths.append(np.diff(b.step_offsets).astype(np.int64))
        highest.append(b.highest_tile.copy())
        engines += [b.engine(r) or "none" for r in range(len(b))]
        d.total_steps += b.n_steps
        if kept < STEP_SAMPLE:
            take = slice(0, min(b.n_steps, STEP_SAMPLE - kept))
            moves.append(b.moves[take].copy())
            legal.append(b.legal_masks[take].copy())
            ev.append(b.branch_values[take].copy())
            kept += take.stop
    d.scores = np.concatenate(scores) if scores else np.zeros(0, np.uint64)
    d.lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    d.highest = np.concatenate(highest) if highest else np.zeros(0, np.uint32)
    d.engines = engines
    d.moves = np.concatenate(moves) if moves else np.zeros(0, np.uint8)
    d.legal = np.concatenate(legal) if legal else np.zeros(0, np.uint8)
    d.ev = np.concatenate(ev) if ev else np.zeros((0, 4), np.float32)
    for r in _replay_choice(d.scores, replay_runs):
        if not 0 <= r < n:
            raise IndexError(f"{path}: replay run {r} is outside the pack's {n} entries")
        b = pack.decode_batch_columns([r])
        m = min(b.n_steps, REPLAY_MAX_STEPS)
        d.replays.append(Replay(f"entry {r} (score {int(b.max_score[0])}, {b.n_steps} moves)",
                                b.boards[:m].copy(), b.moves[:m].copy(),
                                b.branch_values[:m].copy(), b.legal_masks[:m].copy(),
                                int(b.final_boards[0]) if m == b.n_steps else None))
    return d


def _load_dataset(path: str, replay_runs: Optional[Sequence[int]]) -> ReportData:
    from .dataset import Dataset

    ds = Dataset(path, mmap=True, verify=False)
    con = sqlite3.connect(f"file:{os.path.join(path, 'metadata.db')}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT id, first_step_idx, num_steps, max_score, highest_tile, engine "
                           "FROM runs ORDER BY id").fetchall()
    finally:
        con.close()
    d = ReportData("dataset", path)
    if rows:
        cols = list(zip(*rows))
        d.run_ids = np.asarray(cols[0], np.int64)
        first = np.asarray(cols[1], np.int64)
        d.lengths = np.asarray(cols[2], np.int64)
        d.scores = np.asarray(cols[3], np.uint64)
        d.highest = np.asarray(cols[4], np.uint32)
        d.engines = [e if e else "none" for e in cols[5]]
    else:
        d.run_ids = first = d.lengths = np.zeros(0, np.int64)
        d.scores, d.highest = np.zeros(0, np.uint64), np.zeros(0, np.uint32)
    # Rows copied out by the library (get_batch), not views of the mapping:
    # a steps.npy cut short meanwhile raises instead of ending the process.
    d.total_steps = len(ds)
    pick = _sample(len(ds), STEP_SAMPLE)
    s = ds.get_batch(np.arange(len(ds)) if pick is None else pick)
    d.moves, d.legal = s["move"].copy(), s["ev_legal"].copy()
    d.ev = s["ev_values"].copy()
    by_id = {int(r): k for k, r in enumerate(d.run_ids)}
    wanted = replay_runs
    picks = [int(d.run_ids[k]) for k in _replay_choice(d.scores, None)] if not wanted else wanted
    for rid in picks:
        if int(rid) not in by_id:
            raise IndexError(f"{path}: replay run id {rid} is not in the dataset")
        k = by_id[int(rid)]
        a = int(first[k])
        m = min(int(d.lengths[k]), REPLAY_MAX_STEPS)
        rs = ds.get_batch(np.arange(a, a + m))
        d.replays.append(Replay(f"run {rid} (score {int(d.scores[k])}, {int(d.lengths[k])} moves)",
                                rs["board"].copy(), rs["move"].copy(), rs["ev_values"].copy(),
                                rs["ev_legal"].copy()))
    return d


def _load_log(path: str) -> ReportData:
    from .logger import decode

    data = decode(path)
    d = ReportData("log", path, log=data)
    d.total_steps = len(data)
    return d


def load(path: PathLike, *, replay_runs: Optional[Sequence[int]] = None) -> ReportData:
    """Read what the report shows from a packfile, a dataset folder or a
    logger folder (``segments/`` inside). ``replay_runs``: runs to replay
    (pack entries or dataset run ids); default the best, median and worst."""
    path = os.fspath(path)
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, "steps.npy")):
            return _load_dataset(path, replay_runs)
        if os.path.isdir(os.path.join(path, "segments")):
            return _load_log(path)
        raise ValueError(f"{path}: a folder that is neither a dataset (steps.npy) nor a logger "
                         "folder (segments/)")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file or folder")
    return _load_pack(path, replay_runs)


# ------------------------------------------------------------------ plots
_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
           "#8c8c8c"]


def _plt() -> Any:
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError("a2pack.report needs matplotlib (pip install matplotlib, or the "
                          "a2pack[report] extra)") from e
    matplotlib.use("Agg", force=False) if "matplotlib.pyplot" not in sys.modules else None
    import matplotlib.pyplot as plt
    return plt


def _fig(title: str, xlabel: str, ylabel: str) -> Tuple[Any, Any]:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 3.6), dpi=100)
    ax.set_title(title, fontsize=12, loc="left", fontweight="bold", color="#333333")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    return fig, ax


def _hist(values: np.ndarray, title: str, xlabel: str, color: str, bins: int = 40,
          log_x: bool = False) -> Any:
    fig, ax = _fig(title, xlabel, "runs")
    v = np.asarray(values, dtype=np.float64)
    if v.size:
        if log_x and v.min() > 0:
            edges = np.geomspace(v.min(), v.max() * 1.0001, bins + 1)
            ax.set_xscale("log")
        else:
            edges = bins  # type: ignore[assignment]  # an int: numpy picks the edges
        ax.hist(v, bins=edges, color=color, edgecolor="white", linewidth=0.5)
        ax.axvline(float(np.mean(v)), color="#333333", linestyle="--", linewidth=1)
        # Right-hand title: never drawn over the bars.
        ax.set_title(f"mean {np.mean(v):,.0f}   median {np.median(v):,.0f}", loc="right",
                     fontsize=9, color="#555555")
    fig.tight_layout()
    return fig


def _bars(labels: Sequence[Any], counts: np.ndarray, title: str, xlabel: str, ylabel: str,
          color: str) -> Any:
    fig, ax = _fig(title, xlabel, ylabel)
    x = np.arange(len(labels))
    ax.bar(x, counts, color=color, edgecolor="white")
    ax.set_xticks(x, [str(l) for l in labels])
    total = max(1, int(np.sum(counts)))
    for xi, c in zip(x, counts):
        ax.text(xi, c, f"{100 * c / total:.1f}%", ha="center", va="bottom", fontsize=8,
                color="#555555")
    fig.tight_layout()
    return fig


def _popcount4(m: np.ndarray) -> np.ndarray:
    m = m.astype(np.uint8) & 0xF
    out: np.ndarray = ((m & 1) + ((m >> 1) & 1) + ((m >> 2) & 1) + ((m >> 3) & 1)).astype(np.int64)
    return out


def figures(data: Union["ReportData", PathLike]) -> Dict[str, Any]:
    """The report's plots as matplotlib Figures, keyed by name. ``data`` is
    a :class:`ReportData` or anything :func:`load` takes."""
    if not isinstance(data, ReportData):
        data = load(data)
    if data.kind == "log":
        return _log_figures(data)
    out = {}
    out["score"] = _hist(data.scores, "Score distribution", "max score", _COLORS[0])
    out["length"] = _hist(data.lengths, "Run length distribution", "moves per run", _COLORS[1])
    tiles, counts = np.unique(data.highest, return_counts=True)
    out["highest_tile"] = _bars(tiles.tolist(), counts, "Highest tile reached", "tile", "runs",
                                _COLORS[2])
    mc = np.bincount(data.moves.astype(np.int64), minlength=4)[:4]
    out["moves"] = _bars(MOVE_NAMES, mc, "Moves chosen", "move", "steps", _COLORS[3])
    lc = np.bincount(_popcount4(data.legal), minlength=5)[:5]
    out["legal_moves"] = _bars(list(range(5)), lc, "Legal moves per step", "legal moves",
                               "steps", _COLORS[4])
    out["ev_values"] = _ev_figure(data)
    out["engines"] = _engine_figure(data)
    return out


def _ev_figure(data: ReportData) -> Any:
    fig, ax = _fig("EV values of legal moves", "EV value", "steps")
    legal = np.stack([(data.legal >> k) & 1 for k in range(4)], axis=1).astype(bool)
    vals = data.ev[legal] if data.ev.size else np.zeros(0)
    n = len(data.moves)
    chosen = data.ev[np.arange(n), np.minimum(data.moves, 3)] if n else np.zeros(0)
    chosen = chosen[legal[np.arange(n), np.minimum(data.moves, 3)]] if n else chosen
    if vals.size:
        lo, hi = float(np.min(vals)), float(np.max(vals))
        bins = np.linspace(lo, hi if hi > lo else lo + 1, 41)
        ax.hist(vals, bins=bins, color=_COLORS[5], alpha=0.55, label="all legal moves")
        ax.hist(chosen, bins=bins, color=_COLORS[0], alpha=0.75, label="chosen move")
        ax.legend(frameon=False, fontsize=9)
    else:
        ax.text(0.5, 0.5, "no EV values stored", ha="center", va="center",
                transform=ax.transAxes)
    fig.tight_layout()
    return fig


def _engine_figure(data: ReportData) -> Any:
    fig, ax = _fig("Score by engine", "engine", "max score")
    names = sorted(set(data.engines))
    groups = [np.asarray(data.scores, np.float64)[[e == n for e in data.engines]] for n in names]
    if names:
        bp = ax.boxplot(groups, patch_artist=True, widths=0.55, showfliers=False)
        for k, patch in enumerate(bp["boxes"]):
            patch.set_facecolor(_COLORS[k % len(_COLORS)])
            patch.set_alpha(0.8)
        for med in bp["medians"]:
            med.set_color("#222222")
        labels = [f"{n}\n{len(g)} runs, mean {np.mean(g):,.0f}" if len(g) else n
                  for n, g in zip(names, groups)]
        ax.set_xticks(np.arange(1, len(names) + 1), labels, fontsize=8)
    fig.tight_layout()
    return fig


def _log_figures(data: ReportData) -> Dict[str, Any]:
    log = data.log
    out: Dict[str, Any] = {}
    for sid, stream in sorted(log.streams.items())[:24]:
        rows = np.nonzero(log.stream_ids == sid)[0]
        label = ", ".join(f"{k}={v}" for k, v in stream.labels.items()) or f"stream {sid}"
        fig, ax = _fig(f"Stream {sid}: {label}"[:70], "epoch", "value")
        if rows.size:
            starts = log.offsets[rows].astype(np.int64)
            ends = log.offsets[rows + 1].astype(np.int64)
            counts = ends - starts
            flat = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)]) \
                if counts.sum() else np.zeros(0, np.int64)
            rec = np.repeat(rows, counts)
            idx = log.indices[flat]
            top = np.unique(idx, return_counts=True)
            keep = top[0][np.argsort(-top[1], kind="stable")[:8]]
            for k, ix in enumerate(sorted(keep.tolist())):
                sel = idx == ix
                ax.plot(log.epochs[rec[sel]], log.values[flat[sel]], color=_COLORS[k % 8],
                        linewidth=1.2, marker="o" if sel.sum() < 40 else None, markersize=3,
                        label=f"index {ix}")
            if keep.size:
                ax.legend(frameon=False, fontsize=8, ncol=2)
        fig.tight_layout()
        out[f"stream_{sid}"] = fig
    return out


def svg(fig: Any) -> str:
    """A Figure as an inline <svg> element (text as paths: no fonts needed)."""
    plt = _plt()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return str(text[text.index("<svg"):])


# ------------------------------------------------------------------ html
_CSS = """
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;
 margin:0;background:#f6f5f1;color:#222}
header{background:#776e65;color:#fff;padding:18px 32px}
header h1{margin:0;font-size:22px} header p{margin:4px 0 0;opacity:.85;font-size:13px}
main{padding:20px 32px}
.summary{display:flex;flex-wrap:wrap;gap:12px;margin-bottom:18px}
.stat{background:#fff;border-radius:8px;padding:10px 16px;box-shadow:0 1px 3px rgba(0,0,0,.08)}
.stat b{display:block;font-size:20px} .stat span{font-size:12px;color:#777}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:16px}
figure.plot{background:#fff;margin:0;border-radius:8px;padding:8px;
 box-shadow:0 1px 3px rgba(0,0,0,.08)}
figure.plot svg{width:100%;height:auto;display:block}
section.replay{background:#fff;border-radius:8px;padding:16px;margin-bottom:18px;
 box-shadow:0 1px 3px rgba(0,0,0,.08)}
.rp{display:flex;gap:28px;align-items:flex-start;flex-wrap:wrap}
#board{display:grid;grid-template-columns:repeat(4,72px);grid-gap:8px;background:#bbada0;
 padding:8px;border-radius:8px}
.tile{width:72px;height:72px;border-radius:5px;display:flex;align-items:center;
 justify-content:center;font-weight:bold;font-size:26px;color:#776e65;background:#cdc1b4}
.moves{display:grid;grid-template-columns:repeat(2,150px);gap:8px;margin-top:10px}
.mv{border:2px solid #ddd;border-radius:6px;padding:6px 10px;font-size:14px}
.mv.illegal{color:#bbb;border-style:dashed}
.mv.chosen{border-color:#f65e3b;background:#fff1ea;font-weight:bold}
.controls{margin:10px 0} .controls input[type=range]{width:420px}
#stepinfo{font-size:14px;color:#555;margin-top:6px}
"""

_TILE_COLORS = {0: "#cdc1b4", 1: "#eee4da", 2: "#ede0c8", 3: "#f2b179", 4: "#f59563",
                5: "#f67c5f", 6: "#f65e3b", 7: "#edcf72", 8: "#edcc61", 9: "#edc850",
                10: "#edc53f", 11: "#edc22e"}

_JS = r"""
const RUNS = JSON.parse(document.getElementById('replay-data').textContent);
const COLORS = %COLORS%;
const NAMES = ['up', 'down', 'left', 'right'];
const ARROWS = ['\u2191', '\u2193', '\u2190', '\u2192'];
const sel = document.getElementById('run'), slider = document.getElementById('step');
const board = document.getElementById('board'), info = document.getElementById('stepinfo');
const moves = document.getElementById('moves');
for (let i = 0; i < 16; i++) { const d = document.createElement('div'); d.className = 'tile'; board.appendChild(d); }
for (let k = 0; k < 4; k++) { const d = document.createElement('div'); d.className = 'mv'; d.id = 'mv' + k; moves.appendChild(d); }
RUNS.forEach((r, i) => { const o = document.createElement('option'); o.value = i; o.textContent = r.title; sel.appendChild(o); });
function show() {
  const r = RUNS[+sel.value || 0]; if (!r) return;
  const last = r.boards.length - 1 + (r.final ? 1 : 0);
  slider.max = Math.max(0, last);
  const s = Math.min(+slider.value, last);
  const hex = s < r.boards.length ? r.boards[s] : r.final;
  board.dataset.board = hex;
  for (let c = 0; c < 16; c++) {
    const e = parseInt(hex[c], 16), t = board.children[c];
    t.textContent = e ? String(2 ** e) : '';
    t.style.background = COLORS[Math.min(e, 11)];
    t.style.color = e >= 3 ? '#f9f6f2' : '#776e65';
    t.style.fontSize = e >= 10 ? '20px' : (e >= 7 ? '23px' : '26px');
  }
  const atEnd = s >= r.boards.length;
  for (let k = 0; k < 4; k++) {
    const d = document.getElementById('mv' + k);
    const legal = !atEnd && ((r.legal[s] >> k) & 1);
    const chosen = !atEnd && r.moves[s] === k;
    d.className = 'mv' + (legal ? '' : ' illegal') + (chosen ? ' chosen' : '');
    d.textContent = ARROWS[k] + ' ' + NAMES[k] + (legal ? '  ' + r.ev[s][k].toFixed(3) : '');
  }
  info.textContent = atEnd ? 'final board (game over)' :
    'step ' + s + ' of ' + r.boards.length + ': chose ' + NAMES[r.moves[s]];
}
sel.addEventListener('change', () => { slider.value = 0; show(); });
slider.addEventListener('input', show);
document.addEventListener('keydown', e => {
  if (e.key === 'ArrowRight') { slider.value = +slider.value + 1; show(); }
  if (e.key === 'ArrowLeft') { slider.value = +slider.value - 1; show(); }
});
show();
"""


# ?selftest: check every plot rendered and the slider moves the board, and
# write the verdict into the page (tests read it with chromium --dump-dom).
_SELFTEST_JS = r"""
window.addEventListener('load', () => {
  if (location.search.indexOf('selftest') < 0) return;
  const res = {plots: [], replay: null};
  document.querySelectorAll('figure.plot').forEach(f => {
    const s = f.querySelector('svg'), r = s ? s.getBoundingClientRect() : null;
    res.plots.push({name: f.dataset.plot, svg: !!s, width: r ? r.width : 0, height: r ? r.height : 0,
                    paths: s ? s.querySelectorAll('path').length : 0});
  });
  const slider = document.getElementById('step'), board = document.getElementById('board');
  if (slider && board) {
    const before = board.dataset.board;
    slider.value = Math.min(5, +slider.max);
    slider.dispatchEvent(new Event('input'));
    res.replay = {before: before, after: board.dataset.board,
                  chosen: document.querySelectorAll('.mv.chosen').length,
                  slider: +slider.value, tiles: board.children.length};
  }
  const pre = document.createElement('pre'); pre.id = 'selftest'; pre.style.display = 'none';
  pre.textContent = JSON.stringify(res); document.body.appendChild(pre);
});
"""


def _replay_json(replays: List[Replay]) -> str:
    runs = []
    for r in replays:
        runs.append({
            "title": r.title,
            "boards": [f"{int(b):016x}" for b in r.boards.tolist()],
            "moves": [int(m) for m in r.moves.tolist()],
            "ev": np.round(r.ev.astype(np.float64), 4).tolist(),
            "legal": [int(m) for m in r.legal.tolist()],
            "final": f"{r.final_board:016x}" if r.final_board is not None else None,
        })
    # </ inside a <script> block would end it; JSON allows the escape.
    return json.dumps(runs, separators=(",", ":")).replace("</", "<\\/")


def _summary(data: ReportData) -> List[Tuple[str, str]]:
    if data.kind == "log":
        s = data.log.summary
        return [("records", f"{s['records']:,}"), ("streams", f"{s['streams']:,}"),
                ("non-zeros", f"{s['values']:,}"), ("segments", f"{s['segments']:,}"),
                ("problems", f"{s['problems']:,}")]
    sc = np.asarray(data.scores, np.float64)
    return [("runs", f"{len(sc):,}"), ("steps", f"{data.total_steps:,}"),
            ("mean score", f"{sc.mean():,.0f}" if sc.size else "-"),
            ("best score", f"{sc.max():,.0f}" if sc.size else "-"),
            ("engines", f"{len(set(data.engines)):,}")]


def replay_html(data: ReportData) -> str:
    """The board replay section (also what :func:`replay` shows in a notebook)."""
    colors = json.dumps([_TILE_COLORS[k] for k in range(12)])
    return (
        '<section class="replay"><h2 style="margin-top:0">Board replay</h2>'
        '<div class="controls"><label>Run <select id="run"></select></label></div>'
        '<div class="rp"><div id="board"></div><div>'
        '<div class="controls"><input type="range" id="step" min="0" max="0" value="0"> '
        '<span style="font-size:12px;color:#888">(or \u2190 \u2192 keys)</span></div>'
        '<div id="stepinfo"></div><div class="moves" id="moves"></div></div></div>'
        f'<script type="application/json" id="replay-data">{_replay_json(data.replays)}</script>'
        f'<script>{_JS.replace("%COLORS%", colors)}</script></section>')


def render(data: ReportData) -> str:
    """The whole report as one HTML string."""
    figs = figures(data)
    title = {"pack": "Packfile", "dataset": "Dataset", "log": "Logger folder"}[data.kind]
    parts = [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>a2pack report: {html.escape(os.path.basename(data.source))}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<header><h1>{title}: {html.escape(os.path.basename(data.source.rstrip('/')))}</h1>",
        f"<p>{html.escape(os.path.abspath(data.source))}</p></header><main>",
        '<div class="summary">',
    ]
    for label, value in _summary(data):
        parts.append(f'<div class="stat"><b>{value}</b><span>{label}</span></div>')
    parts.append('</div>')
    if data.kind != "log" and data.replays:
        parts.append(replay_html(data))
    parts.append('<div class="plots">')
    for name, fig in figs.items():
        parts.append(f'<figure class="plot" data-plot="{html.escape(name)}">{svg(fig)}</figure>')
    parts.append("</div>")
    parts.append(f"</main><script>{_SELFTEST_JS}</script></body></html>")
    return "".join(parts)


def write_report(path: PathLike, out: PathLike, *, replay_runs: Optional[Sequence[int]] = None) -> str:
    """Write the report of ``path`` to ``out`` (temporary name, then rename)."""
    doc = render(load(path, replay_runs=replay_runs))
    out = os.fspath(out)
    tmp = f"{out}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(doc)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return out


class _Html:
    def __init__(self, text: str) -> None:
        self.text = text

    def _repr_html_(self) -> str:
        return self.text


def replay(data: Union[ReportData, PathLike], run: Optional[int] = None) -> _Html:
    """A board replay for a notebook (``run``: pack entry or dataset run id)."""
    if not isinstance(data, ReportData):
        data = load(data, replay_runs=None if run is None else [run])
    elif run is not None:
        data = load(data.source, replay_runs=[run])
    return _Html(f"<style>{_CSS}</style>" + replay_html(data))


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="a2pack report", description="Write an HTML report of a "
                                "packfile, dataset folder or logger folder")
    p.add_argument("input")
    p.add_argument("-o", "--output", required=True, help="output .html file")
    p.add_argument("--replay", help="comma-separated runs to replay (pack entries or dataset "
                   "run ids); default best, median and worst")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (docs/cli.md)")
    args = p.parse_args(argv)
    from .errors import Error

    runs = [int(x) for x in args.replay.split(",") if x] if args.replay else None
    try:
        write_report(args.input, args.output, replay_runs=runs)
    except (Error, OSError, ValueError, IndexError) as e:
        print(f"a2pack: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"input": args.input, "output": args.output,
                          "bytes": os.path.getsize(args.output)}, indent=2))
        return 0
    from ._cli import status

    status(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

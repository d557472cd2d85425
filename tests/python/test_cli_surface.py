"""The surface of the `a2pack` command as docs/cli.md describes it: every
command's --json output parses and has the keys the page documents, the old
and upstream option spellings work, exit statuses are the documented ones,
and the completion scripts load and complete.

The CLI is $A2PACK_CLI, else the `a2pack` binary beside the library in use;
a missing CLI is an error, not a skip.
"""

import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import a2pack

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "cli.md"


from cli_util import CLI
if not CLI.exists():
    raise RuntimeError(f"no a2pack CLI at {CLI}: build it and set A2PACK_CLI")

# Python-backed commands run this interpreter with this package.
_PKG_ROOT = str(pathlib.Path(a2pack.__file__).resolve().parents[1])
_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    [_PKG_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))


def run(*args, ok=True):
    p = subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, env=_ENV)
    if ok:
        assert p.returncode == 0, p.stderr
    return p


# ------------------------------------------------------------------ the doc

def documented_keys():
    """{command: {key: optional}} from the `### \\`a2pack CMD\\`` tables."""
    out, cur = {}, None
    for line in DOC.read_text().splitlines():
        m = re.match(r"### `a2pack ([a-z -]+)`$", line)
        if m:
            cur = out.setdefault(m.group(1), {})
            continue
        if line.startswith("## "):
            cur = None
        row = re.match(r"\| `([a-z_0-9]+)` \| (.*) \|$", line)
        if cur is not None and row:
            cur[row.group(1)] = row.group(2).startswith("only ")
    return out


def command_table():
    """{command: has --json} from the page's command table."""
    out = {}
    for line in DOC.read_text().splitlines():
        m = re.match(r"\| `([a-z -]+)` \| .* \| (yes|no[^|]*) \|$", line)
        if m:
            out[m.group(1)] = m.group(2) == "yes"
    return out


DOCUMENTED = documented_keys()


# ------------------------------------------------------------------ inputs

@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    run("gen", "-n", 3, "-o", d / "runs", "--policy", "greedy", "--seed", 7)
    run("gen", "-n", 2, "-o", d / "more", "--policy", "greedy", "--seed", 8)
    run("pack", "-i", d / "runs", "-o", d / "p.a2pack")
    run("bag", "write", d / "b.bagz", d / "runs")
    run("dataset", "build", "-i", d / "runs", "-o", d / "ds")
    with a2pack.DataLogger(d / "log") as log:
        sid = log.register_stream({"entity": "e", "measure": "m"}, epoch_scale=1e-3,
                                  value_scale=1e-3)
        for i in range(5):
            log.record(sid, float(i), np.array([1, 3], np.uint32),
                       np.array([0.5, 1.0], np.float32))
    first_run = sorted((d / "runs").iterdir())[0]
    return {"d": d, "run": first_run}


def _has(module):
    return importlib.util.find_spec(module) is not None


PY = ["--python", sys.executable]

# command -> (argv builder from the fixture dict and a fresh folder, module it needs)
COMMANDS = {
    "gen": (lambda w, o: ["gen", "-n", 2, "-o", o / "g", "--policy", "greedy"], None),
    "decode": (lambda w, o: ["decode", "-i", w["d"] / "runs"], None),
    "inspect": (lambda w, o: ["inspect", "--run", w["run"]], None),
    "pack": (lambda w, o: ["pack", "-i", w["d"] / "runs", "-o", o / "x.a2pack"], None),
    "validate": (lambda w, o: ["validate", "--packfile", w["d"] / "p.a2pack", "--full"], None),
    "stats": (lambda w, o: ["stats", "--packfile", w["d"] / "p.a2pack"], None),
    "extract": (lambda w, o: ["extract", "--packfile", w["d"] / "p.a2pack", "--indices", "0,2",
                              "-o", o / "ex"], None),
    "to-jsonl": (lambda w, o: ["to-jsonl", "--packfile", w["d"] / "p.a2pack", "-o",
                               o / "x.jsonl"], None),
    "to-parquet": (lambda w, o: ["to-parquet", w["d"] / "p.a2pack", o / "x.parquet", *PY],
                   "pyarrow"),
    "report": (lambda w, o: ["report", w["d"] / "p.a2pack", "-o", o / "r.html", *PY],
               "matplotlib"),
    "dataset build": (lambda w, o: ["dataset", "build", "-i", w["d"] / "runs", "-o", o / "ds"],
                      None),
    "dataset append": (lambda w, o: _append(w, o), None),
    "dataset stats": (lambda w, o: ["dataset", "stats", "-d", w["d"] / "ds"], None),
    "dataset verify": (lambda w, o: ["dataset", "verify", "-d", w["d"] / "ds"], None),
    "bag info": (lambda w, o: ["bag", "info", w["d"] / "b.bagz"], None),
    "bag write": (lambda w, o: ["bag", "write", o / "w.bag", w["d"] / "runs"], None),
    "bag convert": (lambda w, o: ["bag", "convert", w["d"] / "b.bagz", o / "c.a2pack"], None),
    "log info": (lambda w, o: ["log", "info", w["d"] / "log"], None),
    "log to-parquet": (lambda w, o: ["log", "to-parquet", w["d"] / "log", o / "l.parquet", *PY],
                       "pyarrow"),
    "clean": (lambda w, o: _clean(o), None),
}


def _append(w, o):
    shutil.copytree(w["d"] / "ds", o / "ds")
    return ["dataset", "append", "-d", o / "ds", "-i", w["d"] / "more"]


def _clean(o):
    (o / "out.a2pack.tmp-999999999-0").write_bytes(b"left by a killed writer")
    return ["clean", o / "out.a2pack"]


def test_every_json_command_is_documented_and_tested():
    table = command_table()
    with_json = {c for c, j in table.items() if j}
    assert with_json == set(DOCUMENTED), "command table and key tables disagree"
    assert with_json == set(COMMANDS)


def test_command_table_matches_the_tool():
    """Every command the tool has is in the page's table, and has --json
    exactly when the table says so."""
    table = command_table()
    names = []
    top = run("--help").stdout.split("Subcommands:")[1].split("\n\n")[0]
    for line in top.splitlines():
        name = line.split()[0] if line.strip() else None
        if not name:
            continue
        sub = run(name, "--help").stdout
        if "Subcommands:" in sub:
            block = sub.split("Subcommands:")[1].split("\n\n")[0]
            names += [f"{name} {ln.split()[0]}" for ln in block.splitlines() if ln.strip()]
        else:
            names.append(name)
    assert set(names) == set(table)
    for name in names:
        helptext = run(*name.split(), "--help").stdout
        assert ("--json" in helptext) == table[name], name
        if table[name]:
            assert "Print the summary as JSON (docs/cli.md)" in helptext or \
                "Print the report as JSON (docs/cli.md)" in helptext, name


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_json_output_has_documented_keys(name, world, tmp_path):
    build, needs = COMMANDS[name]
    if needs and not _has(needs):
        pytest.skip(f"{needs} is not installed")
    p = run(*build(world, tmp_path), "--json")
    j = json.loads(p.stdout)  # the whole of stdout is one JSON object
    assert isinstance(j, dict)
    assert p.stdout.startswith("{\n  \""), "pretty-printed with 2 spaces"
    keys = DOCUMENTED[name]
    required = {k for k, optional in keys.items() if not optional}
    assert required <= set(j), f"missing {required - set(j)}"
    assert set(j) <= set(keys), f"undocumented {set(j) - set(keys)}"


def test_inspect_json_of_a_pack_entry_and_a_v1_run(world, tmp_path):
    keys = DOCUMENTED["inspect"]
    j = json.loads(run("inspect", "--packfile", world["d"] / "p.a2pack", "--index", 1,
                       "--json").stdout)
    assert set(j) == set(keys)  # the optional keys are the pack entry's
    assert j["index"] == 1 and j["entry"]["storage"] == "stored"
    run("gen", "-n", 1, "-o", tmp_path / "v1", "--format", "v1", "--policy", "greedy")
    (f,) = (tmp_path / "v1").iterdir()
    j = json.loads(run("inspect", "--run", f, "--json").stdout)
    assert j["kind"] == "v1"
    assert set(j) == {k for k, optional in keys.items() if not optional}


def test_json_values_tell_the_truth(world, tmp_path):
    pack = json.loads(run("pack", "-i", world["d"] / "runs", "-o", tmp_path / "p.a2pack",
                          "--json").stdout)
    assert pack["runs"] == 3 and pack["skipped"] == 0
    assert pack["file_bytes"] == (tmp_path / "p.a2pack").stat().st_size
    ex = json.loads(run("extract", "--packfile", tmp_path / "p.a2pack", "--indices", "1",
                        "-o", tmp_path / "ex", "--json").stdout)
    assert ex["count"] == 1
    f = ex["files"][0]
    assert f["index"] == 1 and pathlib.Path(f["path"]).stat().st_size == f["bytes"]
    info = json.loads(run("bag", "info", world["d"] / "b.bagz", "--json").stdout)
    assert info["records"] == 3 and info["shard_count"] == len(info["shards"]) == 1
    clean_dir = tmp_path / "c"
    clean_dir.mkdir()
    cl = json.loads(run(*_clean(clean_dir), "--json").stdout)
    assert cl["removed_count"] == 1 and cl["removed"][0].endswith(".tmp-999999999-0")
    app = json.loads(run(*_append(world, tmp_path), "--json").stdout)
    assert app["runs_added"] == 2 and app["total_runs"] == 5


def test_progress_goes_to_stderr_only(world, tmp_path):
    """With stderr a terminal the bars are drawn there; stdout stays one JSON
    object."""
    import pty
    import select

    master, slave = pty.openpty()
    try:
        for args in (["pack", "-i", world["d"] / "runs", "-o", tmp_path / "t.a2pack"],
                     ["dataset", "build", "-i", world["d"] / "runs", "-o", tmp_path / "tds"],
                     ["validate", "--packfile", world["d"] / "p.a2pack", "--full"]):
            p = subprocess.run([str(CLI), *map(str, args), "--json"], stdout=subprocess.PIPE,
                               stderr=slave, text=True, env=_ENV)
            assert p.returncode == 0
            assert isinstance(json.loads(p.stdout), dict)
            assert "\r" not in p.stdout and "#" not in p.stdout
            # The child has exited: what it drew is already in the pty (the
            # select only keeps a missing bar from blocking the read).
            ready, _, _ = select.select([master], [], [], 10)
            drawn = os.read(master, 1 << 16).decode(errors="replace") if ready else ""
            assert "#" in drawn and "\r" in drawn, f"no progress bar for {args[0]}: {drawn!r}"
    finally:
        os.close(slave)
        os.close(master)


def test_verify_prints_its_report_when_it_fails(world, tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(world["d"] / "ds", ds)
    with open(ds / "steps.npy", "r+b") as f:
        f.seek(-5, os.SEEK_END)
        b = f.read(1)
        f.seek(-5, os.SEEK_END)
        f.write(bytes([b[0] ^ 0xFF]))
    p = run("dataset", "verify", "-d", ds, "--json", ok=False)
    assert p.returncode == 1
    j = json.loads(p.stdout)
    assert j["ok"] is False and j["errors"]


# ------------------------------------------------------------------ aliases

def test_old_and_upstream_spellings(world, tmp_path):
    g = json.loads(run("gen", "-n", 2, "--out", tmp_path / "g", "--jobs", 1, "--no-progress",
                       "--policy", "greedy", "--json").stdout)
    assert g["output"] == str(tmp_path / "g") and len(list((tmp_path / "g").iterdir())) == 2
    d = json.loads(run("decode", "--in", tmp_path / "g", "-w", 2, "--json").stdout)
    assert d["runs"] == 2
    p = json.loads(run("pack", "--in", tmp_path / "g", "--out", tmp_path / "g.a2pack",
                       "--threads", 2, "--silent", "--json").stdout)
    assert p["runs"] == 2 and (tmp_path / "g.a2pack").exists()
    s = json.loads(run("stats", "--packfile", tmp_path / "g.a2pack", "--format-json").stdout)
    assert s["count"] == 2
    # -q after any command, also one that defines no quiet flag of its own.
    run("bag", "info", world["d"] / "b.bagz", "-q")
    run("dataset", "stats", "-d", world["d"] / "ds", "--no-progress", "--json-output")
    # -i/--input name the packfile or dataset a command reads.
    assert json.loads(run("stats", "-i", tmp_path / "g.a2pack", "--json").stdout)["count"] == 2
    assert json.loads(run("validate", "--input", tmp_path / "g.a2pack", "--json").stdout)
    run("dataset", "stats", "-i", world["d"] / "ds", "--json")
    # An alias the command has no option for stays an unknown flag.
    assert run("stats", "--packfile", tmp_path / "g.a2pack", "--out", "x", ok=False).returncode == 2


# ------------------------------------------------------------------ exit codes

def test_usage_errors_exit_2(world, tmp_path):
    assert run("stats", "--packfile", world["d"] / "p.a2pack", "--bogus", ok=False).returncode == 2
    assert run("pack", "-i", world["d"] / "runs", ok=False).returncode == 2  # no --output
    assert run("no-such-command", ok=False).returncode == 2
    assert run(ok=False).returncode == 2
    assert run("gen", "-n", "many", "-o", tmp_path / "x", ok=False).returncode == 2
    assert run("to-jsonl", "--packfile", world["d"] / "p.a2pack", "-o", tmp_path / "x.jsonl",
               "--steps", "--runs", ok=False).returncode == 2
    assert run("completion", "fish", ok=False).returncode == 2
    assert run("--help").returncode == 0 and "Exit status:" in run("--help").stdout


def test_damaged_pack_exits_1(world, tmp_path):
    bad = tmp_path / "bad.a2pack"
    data = bytearray((world["d"] / "p.a2pack").read_bytes())
    data[len(data) // 2] ^= 0x40
    bad.write_bytes(bytes(data))
    p = run("validate", "--packfile", bad, "--full", "--json", ok=False)
    assert p.returncode == 1
    assert p.stdout == "" and "bad.a2pack" in p.stderr


def test_missing_input_exits_3(tmp_path):
    nope = tmp_path / "nope"
    for args in (["validate", "--packfile", nope], ["inspect", "--run", nope],
                 ["decode", "-i", nope], ["pack", "-i", nope, "-o", tmp_path / "x.a2pack"],
                 ["bag", "info", f"{nope}.bagz"], ["dataset", "stats", "-d", nope],
                 ["dataset", "verify", "-d", nope], ["log", "info", nope]):
        p = run(*args, "--json", ok=False)
        assert p.returncode == 3, (args, p.stderr)
        assert "nope" in p.stderr
        if args[:2] == ["dataset", "verify"]:  # prints its report, failed or not
            assert json.loads(p.stdout)["ok"] is False
        else:
            assert p.stdout == ""


# ------------------------------------------------------------------ completion

def _bash_complete(script, *words):
    cmd = (f"source {script}; COMP_WORDS=({' '.join(words)}); "
           f"COMP_CWORD={len(words) - 1}; _a2pack; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completion(tmp_path):
    script = tmp_path / "a2pack.bash"
    script.write_text(run("completion", "bash").stdout)
    assert _bash_complete(script, "a2pack", "pa") == ["pack"]
    assert _bash_complete(script, "a2pack", "dataset", "b") == ["build"]
    assert _bash_complete(script, "a2pack", "pack", "--wo") == ["--workers"]
    assert "--json" in _bash_complete(script, "a2pack", "bag", "info", "--")
    assert set(_bash_complete(script, "a2pack", "log", "")) >= {"info", "decode", "to-parquet"}


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completion_parses(tmp_path):
    script = tmp_path / "_a2pack"
    script.write_text(run("completion", "zsh").stdout)
    p = subprocess.run(["zsh", "-n", str(script)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr

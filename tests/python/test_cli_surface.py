"""The surface of the `a2pack` command as docs/cli.md describes it: every
command's --json output parses and has the keys the page documents, the old
and upstream option spellings work, every command takes its input as the
argument or by any of its names, usage errors are one line naming the
command and what was wrong (with the nearest valid spelling) and a hint,
exit statuses are the documented ones, and the completion scripts load and
complete commands, options and the values of options with a fixed set.

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


COMMANDS_LISTED = ("bag, clean, completion, dataset, decode, extract, gen, inspect, log, pack, "
                   "report, stats, to-jsonl, to-parquet, validate")


def _usage_error(args, first_line, command="a2pack"):
    """A usage error: status 2, nothing on stdout, and on stderr exactly the
    one error line and the hint naming the command's --help."""
    p = run(*args, ok=False)
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    lines = p.stderr.splitlines()
    assert lines == [f"a2pack: error: {first_line}",
                     f"Try '{command} --help' for more information."], p.stderr
    return p


def test_usage_errors_name_the_command_and_what_was_wrong(world, tmp_path):
    pack, runs = world["d"] / "p.a2pack", world["d"] / "runs"
    _usage_error([], f"no command given; the commands are: {COMMANDS_LISTED}")
    _usage_error(["-q"], f"no command given; the commands are: {COMMANDS_LISTED}")
    _usage_error(["dataset"], "no command given after 'dataset'; the dataset commands are: "
                 "append, build, stats, verify", "a2pack dataset")
    _usage_error(["--bogus"], "unknown option '--bogus'")
    _usage_error(["stats", pack, "--bogus"], "stats: unknown option '--bogus'", "a2pack stats")
    # A mistyped option is reported, not the required option it left unset.
    _usage_error(["stats", "--packfle", pack],
                 "stats: unknown option '--packfle'; did you mean '--packfile'?", "a2pack stats")
    _usage_error(["dataset", "stats", world["d"] / "ds", "--jsno"],
                 "dataset stats: unknown option '--jsno'; did you mean '--json'?",
                 "a2pack dataset stats")
    _usage_error(["stats", pack, "extra"], "stats: unexpected argument 'extra'", "a2pack stats")
    _usage_error(["pack", "-i", runs], "pack: -o/--output is required", "a2pack pack")
    _usage_error(["pack", runs, tmp_path / "x.a2pack"], f"pack: unexpected argument "
                 f"'{tmp_path / 'x.a2pack'}' (an output is named with -o/--output)", "a2pack pack")
    _usage_error(["gen", "-n", "many", "-o", tmp_path / "x"],
                 "gen: -n/--runs: 'many' is not a whole number, 0 or more", "a2pack gen")
    _usage_error(["gen", "-n"], "gen: -n/--runs needs a value", "a2pack gen")
    _usage_error(["gen", "-n", 1, "-o", tmp_path / "x", "--policy", "best"],
                 "gen: --policy: 'best' is not one of expectimax, greedy, random", "a2pack gen")
    _usage_error(["completion", "fish"], "completion: SHELL: 'fish' is not one of bash, zsh",
                 "a2pack completion")
    _usage_error(["completion"], "completion: missing argument SHELL", "a2pack completion")
    _usage_error(["bag", "write"], "bag write: missing argument INPUTS", "a2pack bag write")
    _usage_error(["stats", "-i", pack, "--packfile", pack],
                 "stats: -i/--input/--packfile given more than once: give it once", "a2pack stats")
    _usage_error(["bag", "convert", world["d"] / "b.bagz", tmp_path / "o.bagz", "-o",
                  tmp_path / "p.bagz"], "bag convert: give -o/--output or OUTPUT, not both",
                 "a2pack bag convert")
    # Usage errors a command finds after parsing look the same.
    _usage_error(["to-jsonl", pack, "-o", tmp_path / "x.jsonl", "--steps", "--runs"],
                 "to-jsonl: give --steps or --runs, not both", "a2pack to-jsonl")
    assert not (tmp_path / "x").exists()


def test_unknown_commands_name_the_nearest_or_list_them():
    _usage_error(["frobnicate"], f"unknown command 'frobnicate'; the commands are: {COMMANDS_LISTED}")
    _usage_error(["inpsect", "x.a2run2"], "unknown command 'inpsect'; did you mean 'inspect'?")
    _usage_error(["-q", "dcode"], "unknown command 'dcode'; did you mean 'decode'?")
    _usage_error(["val"], "unknown command 'val'; did you mean 'validate'?")  # a beginning
    _usage_error(["to-parket", "a", "b"], "unknown command 'to-parket'; did you mean 'to-parquet'?")
    _usage_error(["dataset", "stat", "-d", "x"],
                 "unknown command 'dataset stat'; did you mean 'dataset stats'?", "a2pack dataset")
    _usage_error(["dataset", "biuld"],
                 "unknown command 'dataset biuld'; did you mean 'dataset build'?", "a2pack dataset")
    _usage_error(["bag", "inf", "x.bagz"], "unknown command 'bag inf'; did you mean 'bag info'?",
                 "a2pack bag")
    _usage_error(["log", "zzz"],
                 "unknown command 'log zzz'; the log commands are: decode, info, to-parquet",
                 "a2pack log")
    # The listing is every command `--help` lists.
    top = run("--help").stdout.split("Subcommands:")[1].split("\n\n")[0]
    assert ", ".join(sorted(ln.split()[0] for ln in top.splitlines() if ln.strip())) == \
        COMMANDS_LISTED


# ------------------------------------------------------------------ inputs

def _same_json(a, b):
    drop = {"seconds", "load_seconds", "decode_seconds", "decode_mb_per_s", "decode_steps_per_s",
            "runs_per_s"}
    return {k: v for k, v in a.items() if k not in drop} == \
        {k: v for k, v in b.items() if k not in drop}


def test_every_command_takes_its_input_as_the_argument_or_any_old_spelling(world, tmp_path):
    d = world["d"]
    pack, runs, ds, bag, log = d / "p.a2pack", d / "runs", d / "ds", d / "b.bagz", d / "log"
    spellings = {
        ("decode",): (runs, ["-i", "--input", "--in"]),
        ("validate",): (pack, ["-i", "--input", "--packfile"]),
        ("stats",): (pack, ["-i", "--input", "--packfile"]),
        ("dataset", "stats"): (ds, ["-i", "--input", "-d", "--dataset"]),
        ("dataset", "verify"): (ds, ["-i", "--input", "-d", "--dataset"]),
        ("bag", "info"): (bag, ["-i", "--input"]),
        ("log", "info"): (log, ["-i", "--input"]),
    }
    for cmd, (value, names) in spellings.items():
        want = json.loads(run(*cmd, value, "--json").stdout)
        for name in names:
            got = json.loads(run(*cmd, name, value, "--json").stdout)
            assert _same_json(got, want), (cmd, name)
    # inspect: a run file, or a packfile entry with --index.
    want = json.loads(run("inspect", world["run"], "--json").stdout)
    for name in ("-i", "--input", "--run"):
        assert json.loads(run("inspect", name, world["run"], "--json").stdout) == want
    want = json.loads(run("inspect", pack, "--index", 1, "--json").stdout)
    assert want["index"] == 1 and want["packfile"] == str(pack)
    for name in ("-i", "--input", "--packfile"):
        assert json.loads(run("inspect", name, pack, "--index", 1, "--json").stdout) == want
    # Commands that write: the same output whichever way the input came.
    for k, args in enumerate((["pack", runs], ["pack", "-i", runs], ["pack", "--input", runs])):
        j = json.loads(run(*args, "-o", tmp_path / f"p{k}.a2pack", "--json").stdout)
        assert j["runs"] == 3 and j["input"] == str(runs)
    assert len({(tmp_path / f"p{k}.a2pack").read_bytes() for k in range(3)}) == 1
    for k, args in enumerate(([pack], ["--packfile", pack], ["-i", pack])):
        run("to-jsonl", *args, "-o", tmp_path / f"j{k}.jsonl")
        run("extract", *args, "--indices", "0-2", "-o", tmp_path / f"ex{k}")
    assert len({(tmp_path / f"j{k}.jsonl").read_bytes() for k in range(3)}) == 1
    for k, args in enumerate(([runs], ["-i", runs])):
        j = json.loads(run("dataset", "build", *args, "-o", tmp_path / f"ds{k}", "--json").stdout)
        assert j["runs_added"] == 3
        shutil.copytree(ds, tmp_path / f"app{k}")
        j = json.loads(run("dataset", "append", "-d", tmp_path / f"app{k}",
                           *([d / "more"] if k == 0 else ["-i", d / "more"]), "--json").stdout)
        assert j["runs_added"] == 2 and j["total_runs"] == 5
    # Output positional too: IN OUT, -i IN OUT and -i IN -o OUT.
    for k, args in enumerate(([bag, tmp_path / "c0.a2pack"], ["-i", bag, tmp_path / "c1.a2pack"],
                              ["-i", bag, "-o", tmp_path / "c2.a2pack"])):
        assert json.loads(run("bag", "convert", *args, "--json").stdout)["runs"] == 3
    assert len({(tmp_path / f"c{k}.a2pack").read_bytes() for k in range(3)}) == 1
    # bag cat keeps -i for --index; its spec is the argument or --input. A
    # list option before the argument leaves it the argument.
    assert run("bag", "cat", bag, "-i", 1, "--lengths").stdout == \
        run("bag", "cat", "--input", bag, "--index", 1, "--lengths").stdout
    two = run("bag", "cat", "--lengths", "-i", 2, 0, bag).stdout
    assert two == run("bag", "cat", "--lengths", "--input", bag, "-i", "2,0").stdout
    assert [ln.split("\t")[0] for ln in two.splitlines()] == ["2", "0"]
    # --help lists every spelling of the input together, the argument optional.
    assert "-i,--input,--packfile" in run("stats", "--help").stdout
    assert "REQUIRED" not in run("stats", "--help").stdout
    assert "-i,-d,--input,--dataset" in run("dataset", "stats", "--help").stdout


def test_an_input_given_twice_or_not_at_all_is_a_usage_error(world, tmp_path):
    d = world["d"]
    pack = d / "p.a2pack"
    _usage_error(["stats"], "stats: no packfile given: name it as the argument (a2pack stats "
                 "PACKFILE) or with -i/--input/--packfile", "a2pack stats")
    _usage_error(["dataset", "verify"], "dataset verify: no dataset folder given: name it as the "
                 "argument (a2pack dataset verify DATASET) or with -i/-d/--input/--dataset",
                 "a2pack dataset verify")
    _usage_error(["inspect", "--json"], "inspect: no run file or packfile given: name it as the "
                 "argument (a2pack inspect FILE) or with -i/--input or --run or --packfile",
                 "a2pack inspect")
    _usage_error(["stats", pack, "--packfile", d / "other.a2pack"],
                 f"stats: packfile given twice, as '{pack}' (the argument) and "
                 f"'{d / 'other.a2pack'}' (-i/--input/--packfile): give it once", "a2pack stats")
    _usage_error(["inspect", "--run", world["run"], "--packfile", pack],
                 f"inspect: run file or packfile given twice, as '{world['run']}' (--run) and "
                 f"'{pack}' (--packfile): give it once", "a2pack inspect")
    _usage_error(["to-parquet", pack, tmp_path / "x.parquet", "-i", pack],
                 f"to-parquet: packfile or dataset folder given twice, as '{pack}' (the "
                 f"argument) and '{pack}' (-i/--input): give it once", "a2pack to-parquet")
    _usage_error(["inspect", pack], f"inspect: {pack} is a packfile of 3 entries: choose one "
                 "with --index I", "a2pack inspect")
    _usage_error(["inspect", "--run", pack, "--index", 1],
                 f"inspect: --index chooses an entry of a packfile, and {pack} was given as a "
                 "run file (--run): give it as the argument or --packfile", "a2pack inspect")
    # Nothing ran: no output was written.
    assert not (tmp_path / "x.parquet").exists()


def test_dataset_stats_reads_past_extra_files_only_when_asked(world, tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(world["d"] / "ds", ds)
    (ds / "notes.txt").write_text("mine")
    p = run("dataset", "stats", ds, ok=False)
    assert p.returncode == 1
    assert p.stderr == (f"a2pack: error: {ds}/notes.txt: unexpected file in a dataset folder (a "
                        "dataset holds steps.npy, metadata.db and manifest.json); remove it, or "
                        "pass --allow-extra-files\n")
    j = json.loads(run("dataset", "stats", ds, "--allow-extra-files", "--json").stdout)
    assert j["runs"] == 3
    assert "--allow-extra-files" in run("dataset", "stats", "--help").stdout
    # verify has no such flag: its error names the command that has one.
    p = run("dataset", "verify", ds, "--json", ok=False)
    assert p.returncode == 1
    (err,) = json.loads(p.stdout)["errors"]
    assert err.endswith("remove it (`a2pack dataset stats --allow-extra-files` reads the dataset "
                        "despite it)")
    assert "allow_extra_files" not in p.stdout + p.stderr


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
    for args in (["validate", "--packfile", nope], ["inspect", "--run", nope], ["inspect", nope],
                 ["decode", "-i", nope], ["pack", "-i", nope, "-o", tmp_path / "x.a2pack"],
                 ["bag", "info", f"{nope}.bagz"], ["dataset", "stats", "-d", nope],
                 ["dataset", "verify", "-d", nope], ["log", "info", nope],
                 # Said before Python runs, whatever the interpreter has.
                 ["to-parquet", nope, tmp_path / "x.parquet", *PY],
                 ["report", nope, "-o", tmp_path / "x.html", *PY],
                 ["log", "to-parquet", nope, tmp_path / "y.parquet", *PY]):
        p = run(*args, "--json", ok=False)
        assert p.returncode == 3, (args, p.stderr)
        assert "nope" in p.stderr
        if args[:2] == ["dataset", "verify"]:  # prints its report, failed or not
            assert json.loads(p.stdout)["ok"] is False
        else:
            assert p.stdout == ""


def test_missing_python_package_exits_3(world, tmp_path):
    """The interpreter lacks pyarrow (or matplotlib): one line naming what to
    install, status 3, as docs/cli.md says in both places it says it."""
    blocked = tmp_path / "blocked"
    for mod in ("pyarrow", "matplotlib"):
        (blocked / mod).mkdir(parents=True)
        (blocked / mod / "__init__.py").write_text(
            f"raise ImportError('{mod} is blocked for this test', name='{mod}')\n")
    env = dict(_ENV, PYTHONPATH=os.pathsep.join([str(blocked), _ENV["PYTHONPATH"]]))
    for args, needs in ((["to-parquet", world["d"] / "p.a2pack", tmp_path / "x.parquet"],
                         "pyarrow"),
                        (["report", world["d"] / "p.a2pack", "-o", tmp_path / "r.html"],
                         "matplotlib"),
                        (["log", "to-parquet", world["d"] / "log", tmp_path / "l.parquet"],
                         "pyarrow")):
        p = subprocess.run([str(CLI), *map(str, args), *PY], capture_output=True, text=True,
                           env=env)
        assert p.returncode == 3, p.stderr
        (line,) = p.stderr.splitlines()
        assert line.startswith("a2pack: error: ") and f"cannot import {needs}" in line
        assert "Traceback" not in p.stderr and p.stdout == ""
    doc = DOC.read_text()
    assert "exits 3 (a missing component" in doc
    table = {m.group(1): m.group(2) for m in re.finditer(r"^\| ([0-4]) \| (.*) \|$", doc, re.M)}
    assert set(table) == {"0", "1", "2", "3", "4"}
    assert "pyarrow" in table["3"] and "pyarrow" not in table["1"]
    assert "with status 1, and a missing package" not in doc


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


def fixed_value_options():
    """{(command path, option or argument name): values} for every option and
    argument whose --help shows a fixed set ("TEXT:{a,b,c}"), over the whole
    tool."""
    out = {}
    top = run("--help").stdout.split("Subcommands:")[1].split("\n\n")[0]
    paths = []
    for line in top.splitlines():
        if not line.strip():
            continue
        name = line.split()[0]
        sub = run(name, "--help").stdout
        if "Subcommands:" in sub:
            block = sub.split("Subcommands:")[1].split("\n\n")[0]
            paths += [f"{name} {ln.split()[0]}" for ln in block.splitlines() if ln.strip()]
        else:
            paths.append(name)
    for path in paths:
        for m in re.finditer(r"^\s+(?:-\w,)?(--[\w-]+|\w+) \w+:\{([^}]*)\}",
                             run(*path.split(), "--help").stdout, re.M):
            out[(path, m.group(1))] = m.group(2).split(",")
    return out


def test_completion_offers_the_values_of_every_option_with_a_fixed_set(tmp_path):
    fixed = fixed_value_options()
    # The ones docs/cli.md names are among them.
    assert {("gen", "--policy"), ("gen", "--format"), ("pack", "--compress"),
            ("bag info", "--compression"), ("bag cat", "--cache"), ("bag convert", "--compression"),
            ("to-parquet", "--layout"), ("completion", "shell")} <= set(fixed)
    bash = run("completion", "bash").stdout
    zsh = run("completion", "zsh").stdout
    for (path, name), values in fixed.items():
        offered = values
        if name.startswith("--"):
            assert f'"{path}|{name}") choices="{" ".join(offered)}" ;;' in bash, (path, name)
            assert f'"{path}|{name}") choices=({" ".join(offered)}) ;;' in zsh, (path, name)
        else:  # an argument: offered with the command's words
            assert re.search(rf'"{path}"\) words="{" ".join(offered)} ', bash), path
            assert re.search(rf'"{path}"\) cands=\({" ".join(offered)} ', zsh), path
    # A range is a fixed set too.
    assert '"gen|--depth") choices="1 2 3 4 5 6" ;;' in bash


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completion_of_option_values(tmp_path):
    script = tmp_path / "a2pack.bash"
    script.write_text(run("completion", "bash").stdout)
    assert _bash_complete(script, "a2pack", "gen", "--policy", "''") == \
        ["expectimax", "greedy", "random"]
    assert _bash_complete(script, "a2pack", "gen", "-n", "3", "--policy", "gr") == ["greedy"]
    # --policy=gr: bash splits it into --policy, = and gr.
    assert _bash_complete(script, "a2pack", "gen", "--policy", "=", "gr") == ["greedy"]
    assert _bash_complete(script, "a2pack", "gen", "--policy", "=") == \
        ["expectimax", "greedy", "random"]
    assert _bash_complete(script, "a2pack", "pack", "--compress", "''") == ["none", "zstd", "lz4"]
    assert _bash_complete(script, "a2pack", "bag", "cat", "x.bagz", "--cache", "d") == \
        ["drop", "direct"]
    assert _bash_complete(script, "a2pack", "to-parquet", "--layout", "r") == ["runs"]
    assert _bash_complete(script, "a2pack", "completion", "z") == ["zsh"]
    # Other values are file names (complete -o default): no words offered.
    assert _bash_complete(script, "a2pack", "gen", "--output", "''") == []


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_completion_of_option_values(tmp_path):
    """The zsh function run outside the completion system: compadd, compset
    and _files stand-ins print what the function offers."""
    script = tmp_path / "_a2pack"
    script.write_text(run("completion", "zsh").stdout)
    stubs = ("compdef() { :; }; compadd() { [[ $1 == -- ]] && shift; print -r -- \"$@\"; }; "
             "compset() { :; }; _files() { print -r -- '<files>'; }; ")

    def complete(*words):
        p = subprocess.run(["zsh", "-f", "-c", stubs + f"source {script}; words=(\"$@\"); "
                            "CURRENT=$#; _a2pack", "zsh", *words], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        return p.stdout.split()

    assert complete("a2pack", "gen", "--policy", "") == ["expectimax", "greedy", "random"]
    assert complete("a2pack", "gen", "--policy=gr") == ["expectimax", "greedy", "random"]
    assert complete("a2pack", "pack", "--compress", "") == ["none", "zstd", "lz4"]
    assert complete("a2pack", "bag", "info", "--compression", "") == ["auto", "none", "zstd"]
    assert complete("a2pack", "completion", "")[:2] == ["bash", "zsh"]
    assert complete("a2pack", "gen", "--output", "") == ["<files>"]
    assert "build" in complete("a2pack", "dataset", "")

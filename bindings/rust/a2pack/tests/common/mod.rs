//! What the integration tests share: the upstream fixture, the CLI and
//! Python peers (found through A2PACK_CLI and A2PACK_PYTHON, which
//! `make test-rust` sets), and small helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The upstream fixture: $A2PACK_FIXTURE, else the shared folder beside
/// the checkout (never copied into the repository).
pub fn fixture() -> PathBuf {
    if let Some(p) = std::env::var_os("A2PACK_FIXTURE") {
        return PathBuf::from(p);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../shared/fixtures/example.a2run2")
}

/// The a2pack CLI, or `None` (with the reason printed) when A2PACK_CLI is unset.
pub fn cli() -> Option<PathBuf> {
    match std::env::var_os("A2PACK_CLI") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            eprintln!("skipped: A2PACK_CLI is not set (make test-rust sets it to the built CLI)");
            None
        }
    }
}

/// The Python with numpy, bagz and the a2pack package, or `None` (with the
/// reason printed) when A2PACK_PYTHON is unset.
pub fn python() -> Option<PathBuf> {
    match std::env::var_os("A2PACK_PYTHON") {
        Some(p) => Some(PathBuf::from(p)),
        None => {
            eprintln!("skipped: A2PACK_PYTHON is not set (make test-rust sets it to the project venv)");
            None
        }
    }
}

/// Run a command and return its stdout; panic with its stderr on failure.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Run a Python script with `args` after it.
pub fn python_script(python: &Path, script: &str, args: &[&Path]) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let mut cmd = Command::new(python);
    cmd.arg("-c").arg(script).args(args);
    // The checkout's package when its generated _ffi.py is there, else the
    // one installed in that Python (make's `python` target installs it).
    if repo.join("bindings/python/a2pack/_ffi.py").exists() {
        cmd.env("PYTHONPATH", repo.join("bindings/python"));
        if let Some(dir) = option_env!("A2PACK_LIB_DIR") {
            cmd.env("A2PACK_LIBRARY", Path::new(dir).join("liba2pack.so"));
        }
    }
    run(&mut cmd)
}

/// A few generated run files in `dir` (greedy policy: they carry branches).
pub fn gen_runs(dir: &Path, n: u64, seed: u64) {
    a2pack::GenOptions::new()
        .policy(a2pack::Policy::Greedy)
        .max_steps(60)
        .jobs(1)
        .write_dir(dir, n, seed)
        .expect("gen runs");
}

/// The run files of `dir`, sorted.
pub fn run_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "a2run2"))
        .collect();
    v.sort();
    v
}

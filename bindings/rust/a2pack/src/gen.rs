//! The 2048 engine and run generator.

use std::path::Path;

use a2pack_sys as sys;

use crate::error::{check, Result};
use crate::ffi::{path_cstr, with_progress};
use crate::run::{Run, RunKind};

/// How the generator picks moves.
///
/// ```
/// let run = a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(8).run(5)?;
/// assert!(!run.has_branches()); // random play stores no branch values
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Depth-limited expectimax; stores branch expected values (default).
    Expectimax,
    /// One-ply heuristic; stores normalised branch values.
    Greedy,
    /// Uniform over legal moves; no branches.
    Random,
}

/// Options of the generator, as a typed builder over `a2pack_gen_options`.
///
/// ```
/// use a2pack::{GenOptions, Policy};
/// let opts = GenOptions::new().policy(Policy::Random).max_steps(50);
/// let run = opts.run(7)?;
/// assert!(run.len() <= 50);
/// assert_eq!(run, opts.run(7)?); // same seed, same game
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct GenOptions {
    raw: sys::a2pack_gen_options,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions::new()
    }
}

impl GenOptions {
    /// The library's defaults (expectimax, depth 2, v2 files, all cores).
    pub fn new() -> GenOptions {
        let mut raw = sys::a2pack_gen_options::default();
        // SAFETY: fills the struct, size included.
        unsafe { sys::a2pack_gen_options_init(&mut raw) };
        GenOptions { raw }
    }

    /// Move policy.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.raw.policy = match policy {
            Policy::Expectimax => sys::A2PACK_POLICY_EXPECTIMAX,
            Policy::Greedy => sys::A2PACK_POLICY_GREEDY,
            Policy::Random => sys::A2PACK_POLICY_RANDOM,
        };
        self
    }

    /// Expectimax search depth in moves.
    pub fn depth(mut self, depth: u32) -> Self {
        self.raw.depth = depth;
        self
    }

    /// File format of [`GenOptions::write_dir`].
    pub fn format(mut self, kind: RunKind) -> Self {
        self.raw.format = kind.raw();
        self
    }

    /// Worker threads of [`GenOptions::write_dir`] (0 = all cores).
    pub fn jobs(mut self, jobs: u32) -> Self {
        self.raw.jobs = jobs;
        self
    }

    /// Start time written into the first run's meta.
    pub fn start_unix_s(mut self, t: u64) -> Self {
        self.raw.start_unix_s = t;
        self
    }

    /// Stop a game after this many moves (0 = until game over).
    pub fn max_steps(mut self, n: u32) -> Self {
        self.raw.max_steps = n;
        self
    }

    /// Play one game with `seed` (same seed and options, same run).
    pub fn run(&self, seed: u64) -> Result<Run> {
        let mut out = std::ptr::null_mut();
        // SAFETY: valid options; out receives an owned run.
        check(unsafe { sys::a2pack_gen_run(&self.raw, seed, &mut out) })?;
        // SAFETY: owned and non-NULL on success.
        Ok(unsafe { Run::from_raw(out) })
    }

    /// Play `n_runs` games into `dir/run-NNNNNN.a2run2`.
    pub fn write_dir(&self, dir: impl AsRef<Path>, n_runs: u64, seed: u64) -> Result<()> {
        self.write_dir_with_progress(dir, n_runs, seed, None)
    }

    /// As [`GenOptions::write_dir`], telling `progress(done, total)`; it
    /// returns `false` to stop (the call then fails with `Interrupted`).
    pub fn write_dir_with_progress(
        &self,
        dir: impl AsRef<Path>,
        n_runs: u64,
        seed: u64,
        progress: Option<&mut dyn FnMut(u64, u64) -> bool>,
    ) -> Result<()> {
        let dir = path_cstr(dir.as_ref())?;
        with_progress(progress, |cb, user| {
            // SAFETY: valid options and path; the callback pair is alive.
            check(unsafe { sys::a2pack_gen_dir(&self.raw, dir.as_ptr(), n_runs, seed, cb, user) })
        })
    }
}

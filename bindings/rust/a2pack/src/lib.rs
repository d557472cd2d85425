//! Safe Rust interface to [a2pack](https://github.com/): 2048 game-play data
//! from run files to training batches, over the library's C API
//! (`a2pack-sys`). No format is re-implemented here: every byte is read and
//! written by liba2pack.
//!
//! - [`Run`], [`RunBatch`]: `.a2run2` run files (v1 and v2), columnar batches;
//! - [`Pack`], [`PackWriter`]: packfiles;
//! - [`Dataset`], [`dataset::build`], [`Sampler`]: step datasets;
//! - [`Feed`]: training batches gathered ahead by library threads, also of
//!   replay orders ([`Feed::open_replay`]: windows, draws with replacement,
//!   the newest rows, [`Priorities`]) and of sharded datasets within a
//!   memory budget ([`Feed::open_shards`]);
//! - [`bag::Reader`], [`bag::Writer`]: Bagz record files;
//! - [`DataLogger`], [`logger::decode`]: the sparse-vector data logger;
//! - [`Board`], [`GenOptions`]: boards and the game generator;
//! - [`arrow`]: every capability's Arrow C Data Interface exports;
//! - [`clean_temps`]: the temporaries killed writers left.
//!
//! Handles close on drop. Every fallible call returns [`Result`], whose
//! [`Error`] carries the [`Status`] and the library's message. Handles are
//! `Send`; those the header documents as shareable between threads
//! ([`Pack`], [`Dataset`], [`bag::Reader`], [`bag::MultiIndex`],
//! [`DataLogger`]) are also `Sync`. Progress callbacks are closures
//! returning `true` to go on; a panic inside one is caught before it reaches
//! C and resumed when the call returns.
//!
//! ```
//! let run = a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).run(1)?;
//! println!("{} steps, score {}", run.len(), run.meta()?.max_score);
//! # Ok::<(), a2pack::Error>(())
//! ```
#![warn(missing_docs, missing_debug_implementations)]

mod board;
mod error;
mod feed;
mod ffi;
mod gen;
mod pack;
mod replay;
mod run;
mod shards;

pub mod arrow;
pub mod bag;
pub mod dataset;
pub mod logger;

pub use a2pack_sys as sys;
pub use board::{branches_normalise, Board, Move, MoveSet};
pub use dataset::{
    BuildOptions, BuildResult, ColumnsMut, Dataset, DatasetInfo, Mix, MixBatch, MixSource, OpenOptions, Sampler,
    SqlParam, StepRow,
};
pub use error::{Error, ErrorDetails, Result, Status};
pub use feed::{DlpackColumn, Feed, FeedBatch, FeedBatchInfo, FeedColumn, FeedOptions, FeedStats, Moves, MovesDtype, Pin};
pub use gen::{GenOptions, Policy};
pub use logger::{DataLogger, LoggerOptions, StreamId};
pub use pack::{
    pack_dir, BuildSummary, JsonlMode, Pack, PackBatch, PackCompression, PackEntry, PackHistograms, PackIter,
    PackIterOptions, PackOptions, PackStats, PackWriter, PackWriterOptions, ReadFlags,
};
pub use replay::{Priorities, ReplayOptions, ShardFeedOptions};
pub use run::{Branches, Run, RunBatch, RunColumns, RunKind, RunMeta, Steps};
pub use shards::{ShardStream, ShardStreamInfo, ShardStreamOptions, ShardStreamStats};

use std::ffi::CStr;

/// The library version, "MAJOR.MINOR.PATCH".
///
/// ```
/// assert!(a2pack::version().split('.').count() == 3);
/// ```
pub fn version() -> &'static str {
    // SAFETY: static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::a2pack_version()) }.to_str().unwrap_or("")
}

/// The zstd release the library uses.
pub fn zstd_version() -> &'static str {
    // SAFETY: static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::a2pack_zstd_version()) }.to_str().unwrap_or("")
}

/// The LZ4 release the library compresses packfile entries with.
pub fn lz4_version() -> &'static str {
    // SAFETY: static NUL-terminated string.
    unsafe { CStr::from_ptr(sys::a2pack_lz4_version()) }.to_str().unwrap_or("")
}

/// The ABI version of the loaded library.
pub fn abi_version() -> u32 {
    // SAFETY: pure function.
    unsafe { sys::a2pack_abi_version() }
}

/// Remove the temporaries killed writers left (`<out>.tmp-<pid>-<n>`) of
/// `path` (an output file) or of every output in `path` (a folder): only
/// files whose process is gone and that nobody holds locked. Returns the
/// removed paths.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// assert!(a2pack::clean_temps(dir.path())?.is_empty());
/// # Ok::<(), a2pack::Error>(())
/// ```
pub fn clean_temps(path: impl AsRef<std::path::Path>) -> Result<Vec<std::path::PathBuf>> {
    let c = ffi::path_cstr(path.as_ref())?;
    let mut removed: Vec<std::path::PathBuf> = Vec::new();
    let mut count = 0u64;
    // SAFETY: valid path; the callback appends to `removed`, alive for the call.
    let status = unsafe {
        sys::a2pack_clean_temps(
            c.as_ptr(),
            Some(ffi::collect_path),
            (&mut removed as *mut Vec<std::path::PathBuf>).cast(),
            &mut count,
        )
    };
    error::check(status)?;
    Ok(removed)
}

//! Sharded datasets larger than RAM: whole shards resident within a memory
//! budget, batches of a block shuffle, per-rank deals from one seed, exact
//! checkpoints (docs/dataset.md, "Datasets larger than RAM").

use std::path::Path;

use a2pack_sys as sys;

use crate::dataset::{raw_columns, ColumnsMut};
use crate::error::{check, Error, Result, Status};
use crate::ffi::{path_cstr, take_owned, unsafe_send};

/// Options of [`ShardStream::open`]: builder methods over the C struct.
#[derive(Debug, Clone, Copy)]
pub struct ShardStreamOptions {
    raw: sys::a2pack_shard_stream_options,
}

impl Default for ShardStreamOptions {
    fn default() -> Self {
        ShardStreamOptions::new()
    }
}

impl ShardStreamOptions {
    /// Defaults: 1 GiB budget, 4 096-row batches, seed 0, rank 0 of 1,
    /// windows as large as half the budget holds, shards checked on load,
    /// the next window loaded ahead.
    pub fn new() -> ShardStreamOptions {
        let mut raw = sys::a2pack_shard_stream_options::default();
        // SAFETY: fills the struct.
        unsafe { sys::a2pack_shard_stream_options_init(&mut raw) };
        ShardStreamOptions { raw }
    }
    /// Memory for resident shards (at least two of the largest).
    pub fn budget_bytes(mut self, bytes: u64) -> Self {
        self.raw.budget_bytes = bytes;
        self
    }
    /// Rows per batch (per rank).
    pub fn batch_size(mut self, rows: u64) -> Self {
        self.raw.batch_size = rows;
        self
    }
    /// The shuffle's seed, the same on every rank.
    pub fn seed(mut self, seed: u64) -> Self {
        self.raw.seed = seed;
        self
    }
    /// This process's rank of `world` data-parallel ranks.
    pub fn rank(mut self, rank: u32, world: u32) -> Self {
        self.raw.rank = rank;
        self.raw.world = world;
        self
    }
    /// Shards a batch is drawn from (0: as many as half the budget holds).
    pub fn window_shards(mut self, n: u32) -> Self {
        self.raw.window_shards = n;
        self
    }
    /// One rank: drop an epoch's short last batch.
    pub fn drop_last(mut self, on: bool) -> Self {
        self.raw.drop_last = i32::from(on);
        self
    }
    /// Load the next window on a background thread (default on).
    pub fn prefetch(mut self, on: bool) -> Self {
        self.raw.prefetch = i32::from(on);
        self
    }
}

/// Where a stream stands and what its rank holds this epoch.
pub type ShardStreamInfo = sys::a2pack_shard_stream_info;
/// Loads, evictions, bytes read, resident memory, waits.
pub type ShardStreamStats = sys::a2pack_shard_stream_stats;

/// A stream of block-shuffled batches over a sharded dataset (a
/// single-file dataset is one shard). One thread at a time (`Send`).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).max_steps(40).write_dir(dir.path().join("runs"), 6, 1)?;
/// let opts = a2pack::BuildOptions::new().shard_rows(60);
/// a2pack::dataset::build(dir.path().join("runs"), dir.path().join("ds"), &opts, None)?;
/// let mut s = a2pack::ShardStream::open(dir.path().join("ds"),
///     &a2pack::ShardStreamOptions::new().batch_size(16).budget_bytes(1 << 20))?;
/// let (mut moves, mut idx) = (vec![0u8; 16], vec![0i64; 16]);
/// let mut cols = a2pack::ColumnsMut { moves: Some(&mut moves), ..Default::default() };
/// let mut rows = 0;
/// loop {
///     let n = s.next_batch(&mut cols, Some(&mut idx))?;
///     if n == 0 { break; }  // the end of the epoch
///     rows += n;
/// }
/// assert_eq!(rows as u64, s.info()?.rows);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug)]
pub struct ShardStream {
    raw: *mut sys::a2pack_shard_stream,
    batch: usize,
}

unsafe_send!(ShardStream);

impl Drop for ShardStream {
    fn drop(&mut self) {
        // SAFETY: owned handle, closed once.
        unsafe { sys::a2pack_shard_stream_close(self.raw) };
    }
}

impl ShardStream {
    /// Open a stream at epoch 0, batch 0.
    pub fn open(dir: impl AsRef<Path>, opts: &ShardStreamOptions) -> Result<ShardStream> {
        let c = path_cstr(dir.as_ref())?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid string and options; out receives an owned handle.
        check(unsafe { sys::a2pack_shard_stream_open(c.as_ptr(), &opts.raw, &mut raw) })?;
        Ok(ShardStream { raw, batch: opts.raw.batch_size as usize })
    }

    /// Counts of the dataset, the position and this rank's share.
    pub fn info(&self) -> Result<ShardStreamInfo> {
        let mut i = ShardStreamInfo { size: std::mem::size_of::<ShardStreamInfo>(), ..Default::default() };
        // SAFETY: a sized out struct.
        check(unsafe { sys::a2pack_shard_stream_get_info(self.raw, &mut i) })?;
        Ok(i)
    }

    /// Start `epoch` at its first batch.
    pub fn set_epoch(&mut self, epoch: u64) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { sys::a2pack_shard_stream_set_epoch(self.raw, epoch) })
    }

    /// Gather the next batch into `out` (slices of batch_size rows: × 16
    /// for exponents, × 4 for legal and ev_values) and its global row
    /// indices into `idx`; its length, 0 at the end of an epoch (the stream
    /// then stands at the next epoch's first batch).
    pub fn next_batch(&mut self, out: &mut ColumnsMut<'_>, idx: Option<&mut [i64]>) -> Result<usize> {
        let b = self.batch;
        let raw = raw_columns("next_batch", out, b, false)?;
        let ip = match idx {
            None => std::ptr::null_mut(),
            Some(s) if s.len() >= b => s.as_mut_ptr(),
            Some(s) => {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!("next_batch: idx holds {} values, {b} needed", s.len()),
                ))
            }
        };
        let mut n = 0usize;
        // SAFETY: every non-NULL destination holds batch_size rows.
        check(unsafe { sys::a2pack_shard_stream_next(self.raw, &raw, ip, &mut n) })?;
        Ok(n)
    }

    /// Global row indices of batch `b` of the current epoch (empty past
    /// it), without loading anything.
    pub fn batch_indices(&mut self, b: u64) -> Result<Vec<i64>> {
        let mut out = vec![0i64; self.batch];
        let mut n = 0usize;
        // SAFETY: out holds batch_size values.
        check(unsafe { sys::a2pack_shard_stream_batch_indices(self.raw, b, out.as_mut_ptr(), &mut n) })?;
        out.truncate(n);
        Ok(out)
    }

    /// The position as a small versioned byte string.
    pub fn save_state(&self) -> Result<Vec<u8>> {
        let (mut data, mut len) = (std::ptr::null_mut(), 0usize);
        // SAFETY: out receives owned memory of len bytes.
        check(unsafe { sys::a2pack_shard_stream_save_state(self.raw, &mut data, &mut len) })?;
        // SAFETY: owned memory of len bytes.
        Ok(unsafe { take_owned(data, len) })
    }

    /// Resume at a [`save_state`](ShardStream::save_state); refused, naming
    /// what differs, when it cannot resume exactly.
    pub fn load_state(&mut self, state: &[u8]) -> Result<()> {
        // SAFETY: len bytes read during the call.
        check(unsafe { sys::a2pack_shard_stream_load_state(self.raw, state.as_ptr().cast(), state.len()) })
    }

    /// Loads, evictions, bytes read, resident memory and waits so far.
    pub fn stats(&self) -> Result<ShardStreamStats> {
        let mut s = ShardStreamStats { size: std::mem::size_of::<ShardStreamStats>(), ..Default::default() };
        // SAFETY: a sized out struct.
        check(unsafe { sys::a2pack_shard_stream_get_stats(self.raw, &mut s) })?;
        Ok(s)
    }
}

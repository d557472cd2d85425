//! Replay orders and sharded datasets through the one feed
//! (docs/replay.md, docs/dataset.md): windows of consecutive steps of one
//! run, draws with replacement, the newest rows only, prioritized replay
//! ([`Priorities`]), and a sharded dataset read within a memory budget.

use std::path::Path;

use a2pack_sys as sys;

use crate::dataset::Dataset;
use crate::error::{check, Result};
use crate::feed::{Feed, FeedOptions};
use crate::ffi::{path_cstr, unsafe_send, unsafe_sync};

/// How [`Feed::open_shards`] keeps a sharded dataset's rows; the defaults
/// are the library's (`a2pack_feed_shards_options_init`).
#[derive(Debug, Clone, Copy)]
pub struct ShardFeedOptions {
    raw: sys::a2pack_feed_shards_options,
}

impl Default for ShardFeedOptions {
    fn default() -> Self {
        ShardFeedOptions::new()
    }
}

impl ShardFeedOptions {
    /// The library's defaults: a 1 GiB budget, windows as many shards as
    /// half of it holds, shards checked as they load, huge pages.
    pub fn new() -> ShardFeedOptions {
        let mut raw = sys::a2pack_feed_shards_options::default();
        // SAFETY: fills the struct (size included).
        unsafe { sys::a2pack_feed_shards_options_init(&mut raw) };
        ShardFeedOptions { raw }
    }
    /// Memory for resident shards (at least two of the largest shard).
    pub fn budget_bytes(mut self, n: u64) -> Self {
        self.raw.budget_bytes = n;
        self
    }
    /// Shards per window (0: as many as half the budget holds).
    pub fn window(mut self, shards: u32) -> Self {
        self.raw.window = shards;
        self
    }
    /// Check each shard against the manifest as it loads.
    pub fn verify_crc(mut self, on: bool) -> Self {
        self.raw.verify_crc = on.into();
        self
    }
    /// Transparent huge pages for resident shards.
    pub fn huge_pages(mut self, on: bool) -> Self {
        self.raw.huge_pages = on.into();
        self
    }
}

/// The replay order of [`Feed::open_replay`]; the defaults are the
/// library's (`a2pack_feed_replay_options_init`): single rows, epochs, every
/// row.
#[derive(Debug, Clone, Copy)]
pub struct ReplayOptions {
    raw: sys::a2pack_feed_replay_options,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions::new()
    }
}

impl ReplayOptions {
    /// The library's defaults.
    pub fn new() -> ReplayOptions {
        let mut raw = sys::a2pack_feed_replay_options::default();
        // SAFETY: fills the struct (size included).
        unsafe { sys::a2pack_feed_replay_options_init(&mut raw) };
        ReplayOptions { raw }
    }
    /// Steps per unit: windows of `t` consecutive steps of one run (a batch
    /// of B windows holds B * t rows, window i at rows i*t .. (i+1)*t).
    pub fn window(mut self, t: u64) -> Self {
        self.raw.window = t;
        self
    }
    /// 1: a window at every step one fits after; the window: tiles.
    pub fn stride(mut self, s: u64) -> Self {
        self.raw.stride = s;
        self
    }
    /// Pad runs shorter than a window (the `Valid` column marks padding)
    /// instead of leaving them out.
    pub fn pad_short(mut self, on: bool) -> Self {
        self.raw.pad_short = on.into();
        self
    }
    /// Endless draws with replacement instead of epochs.
    pub fn replacement(mut self, on: bool) -> Self {
        self.raw.replacement = on.into();
        self
    }
    /// Only the newest `rows` rows (0: every row).
    pub fn recent(mut self, rows: u64) -> Self {
        self.raw.recent = rows;
        self
    }
    /// The window length these options ask for.
    pub fn window_len(&self) -> u64 {
        self.raw.window.max(1)
    }
}

/// Prioritized replay's priorities, one per row of a dataset (the
/// `a2pack_priorities_*` section): a feed opened with them draws rows with
/// probability p^alpha and fills the `Weights` column. Updates are
/// thread-safe while the feed draws; the feed keeps its own reference, so
/// the handle may go first.
pub struct Priorities {
    raw: *mut sys::a2pack_priorities,
}

unsafe_send!(Priorities);
unsafe_sync!(Priorities);

impl Drop for Priorities {
    fn drop(&mut self) {
        // SAFETY: owned handle, closed once; a feed keeps its own reference.
        unsafe { sys::a2pack_priorities_close(self.raw) }
    }
}

impl std::fmt::Debug for Priorities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Priorities").field("rows", &self.len()).finish()
    }
}

impl Priorities {
    /// `n` rows of priority `initial`.
    pub fn new(n: u64, alpha: f64, beta: f64, initial: f32) -> Result<Priorities> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: out receives an owned handle.
        check(unsafe { sys::a2pack_priorities_open(n, alpha, beta, initial, &mut raw) })?;
        Ok(Priorities { raw })
    }
    /// Priorities saved by [`save`](Priorities::save) (a `.npy` of f32);
    /// `rows` (0: any) refuses a file of another length.
    pub fn load(path: impl AsRef<Path>, alpha: f64, beta: f64, rows: u64) -> Result<Priorities> {
        let c = path_cstr(path.as_ref())?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid string; out receives an owned handle.
        check(unsafe { sys::a2pack_priorities_load(c.as_ptr(), alpha, beta, rows, &mut raw) })?;
        Ok(Priorities { raw })
    }
    /// Write them as a `.npy` of f32, atomically.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let c = path_cstr(path.as_ref())?;
        // SAFETY: valid handle and string.
        check(unsafe { sys::a2pack_priorities_save(self.raw, c.as_ptr()) })
    }
    /// Set rows `rows` to `values` (checked first: nothing changes when
    /// refused).
    pub fn update(&self, rows: &[usize], values: &[f32]) -> Result<()> {
        assert_eq!(rows.len(), values.len(), "one value per row");
        // SAFETY: len values each, read during the call; positions fit i64.
        check(unsafe { sys::a2pack_priorities_update(self.raw, rows.as_ptr().cast(), values.as_ptr(), rows.len()) })
    }
    /// The priorities of `rows`.
    pub fn get(&self, rows: &[usize]) -> Result<Vec<f32>> {
        let mut out = vec![0f32; rows.len()];
        // SAFETY: len values each way.
        check(unsafe { sys::a2pack_priorities_get(self.raw, rows.as_ptr().cast(), rows.len(), out.as_mut_ptr()) })?;
        Ok(out)
    }
    fn info(&self) -> sys::a2pack_priorities_info {
        let mut i = sys::a2pack_priorities_info {
            size: std::mem::size_of::<sys::a2pack_priorities_info>(),
            ..Default::default()
        };
        // SAFETY: valid handle; sized struct.
        unsafe { sys::a2pack_priorities_info_get(self.raw, &mut i) };
        i
    }
    /// Rows.
    pub fn len(&self) -> u64 {
        self.info().rows
    }
    /// Never: a priorities set has at least one row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The sum of p^alpha.
    pub fn total(&self) -> f64 {
        self.info().total
    }
    /// The memory held for the rows: the priorities and the sum tree (5.14
    /// bytes a row, up to 6.5 while it grows with a live dataset).
    pub fn bytes(&self) -> u64 {
        self.info().bytes
    }
}

impl Feed {
    /// A feed over the sharded dataset in `dir` within `shards`' memory
    /// budget, in its block shuffle; `opts`' batch size is the global batch,
    /// each rank taking `batch_size / world` rows of its own shards.
    pub fn open_shards(dir: impl AsRef<Path>, shards: &ShardFeedOptions, opts: &FeedOptions) -> Result<Feed> {
        let c = path_cstr(dir.as_ref())?;
        let mut out = std::ptr::null_mut();
        // SAFETY: valid string; options sized by their init.
        check(unsafe { sys::a2pack_feed_open_shards(c.as_ptr(), &shards.raw, opts.raw(), &mut out) })?;
        Ok(Feed::from_raw(out, 1))
    }

    /// A feed of a replay order over `ds`; `opts`' batch size counts units
    /// (rows or windows): a batch of B windows of T steps holds B * T rows,
    /// its columns `[B, T, ...]` ([`FeedBatch::window`],
    /// [`FeedBatch::shape`]). With `priorities`, rows are drawn by priority,
    /// endlessly. Refused, naming the value, for a window of 0, a stride
    /// other than 1 or the window, or options that leave no unit (a window
    /// longer than every run, without [`pad_short`](ReplayOptions::pad_short)).
    ///
    /// [`FeedBatch::window`]: crate::FeedBatch::window
    /// [`FeedBatch::shape`]: crate::FeedBatch::shape
    pub fn open_replay(
        ds: &Dataset,
        replay: &ReplayOptions,
        priorities: Option<&Priorities>,
        opts: &FeedOptions,
    ) -> Result<Feed> {
        let mut r = replay.raw;
        r.priorities = priorities.map_or(std::ptr::null_mut(), |p| p.raw);
        let mut out = std::ptr::null_mut();
        // SAFETY: valid dataset and priorities (the feed takes its own
        // reference); options sized by their init.
        check(unsafe { sys::a2pack_feed_open_replay(ds.as_ptr(), &r, opts.raw(), &mut out) })?;
        // The library refused a window of 0, and a window it accepted fits
        // in memory, so in usize.
        Ok(Feed::from_raw(out, replay.window_len() as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The options start from the library's init (sized, its defaults), and a
    // setter changes only its own field.
    #[test]
    fn options_start_from_the_library_defaults() {
        let s = ShardFeedOptions::new();
        assert_eq!(s.raw.size, std::mem::size_of::<sys::a2pack_feed_shards_options>());
        assert_eq!((s.raw.budget_bytes, s.raw.window, s.raw.verify_crc, s.raw.huge_pages), (1 << 30, 0, 1, 1));
        let s = s.window(3);
        assert_eq!((s.raw.budget_bytes, s.raw.window), (1 << 30, 3));

        let r = ReplayOptions::new();
        assert_eq!(r.raw.size, std::mem::size_of::<sys::a2pack_feed_replay_options>());
        assert_eq!((r.raw.window, r.raw.stride, r.raw.pad_short, r.raw.replacement, r.raw.recent), (1, 1, 0, 0, 0));
        assert!(r.raw.priorities.is_null());
        let r = r.window(8).recent(100);
        assert_eq!((r.raw.window, r.raw.stride, r.raw.recent, r.window_len()), (8, 1, 100, 8));
    }
}

//! The training feed: a dataset's batches in an epoch sampler's order,
//! gathered ahead by library threads into a ring of reusable buffers
//! (`a2pack_feed_*`, docs/training.md).
//!
//! [`Feed`] is an [`Iterator`] of [`FeedBatch`]es. A batch owns one
//! reference to its ring slot and releases it on drop; its columns are
//! slices into the slot, valid while the batch lives (the compiler sees to
//! it: they borrow the batch). Producers wait for a free slot while the
//! consumer holds batches (backpressure).

use std::fmt;

use a2pack_sys as sys;

use crate::dataset::{positions_ptr, Dataset, Mix};
use crate::error::{check, Error, Result, Status};
use crate::ffi::{take_owned, unsafe_send, unsafe_sync, view};

/// A column a feed can fill ([`FeedOptions::columns`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FeedColumn {
    /// `u8` × 16 per row: tile exponents, cell 0 (top-left) first.
    Exponents,
    /// The chosen move 0..3, in [`FeedOptions::moves_dtype`].
    Moves,
    /// `u8` × 4 per row: 1 where the move is legal.
    Legal,
    /// `f32` × 4 per row.
    EvValues,
    /// `u64`: the packed board.
    Boards,
    /// `u32` run ids.
    RunIds,
    /// `u16`: the step within its run.
    StepIndices,
    /// `u8`: the ev_legal bitmask.
    LegalMask,
    /// The dataset rows of the batch (always filled).
    Indices,
    /// `u8` 0/1: 0 where a window of a short run is padded (replay feeds).
    Valid,
    /// `f32`: importance weights of prioritized feeds (1 otherwise).
    Weights,
}

impl FeedColumn {
    /// Every column, in the library's order.
    pub const ALL: [FeedColumn; 11] = [
        FeedColumn::Exponents,
        FeedColumn::Moves,
        FeedColumn::Legal,
        FeedColumn::EvValues,
        FeedColumn::Boards,
        FeedColumn::RunIds,
        FeedColumn::StepIndices,
        FeedColumn::LegalMask,
        FeedColumn::Indices,
        FeedColumn::Valid,
        FeedColumn::Weights,
    ];

    /// The column's name, as the library's column table spells it (and the
    /// Python binding keys its batches): `"exponents"`, `"ev_values"`, ...
    ///
    /// ```
    /// assert_eq!(a2pack::FeedColumn::EvValues.name(), "ev_values");
    /// ```
    pub fn name(self) -> &'static str {
        let mut info = sys::a2pack_feed_column_info {
            size: std::mem::size_of::<sys::a2pack_feed_column_info>(),
            ..Default::default()
        };
        // Every FeedColumn is a column of the table: the call cannot fail.
        check(unsafe { sys::a2pack_feed_column_info_get(self.raw(), &mut info) })
            .expect("a2pack_feed_column_info_get of a FeedColumn");
        // The names are static strings of the library, never freed.
        unsafe { std::ffi::CStr::from_ptr(info.name) }.to_str().expect("column names are ASCII")
    }

    fn raw(self) -> sys::a2pack_feed_column {
        match self {
            FeedColumn::Exponents => sys::A2PACK_FEED_EXPONENTS,
            FeedColumn::Moves => sys::A2PACK_FEED_MOVES,
            FeedColumn::Legal => sys::A2PACK_FEED_LEGAL,
            FeedColumn::EvValues => sys::A2PACK_FEED_EV_VALUES,
            FeedColumn::Boards => sys::A2PACK_FEED_BOARDS,
            FeedColumn::RunIds => sys::A2PACK_FEED_RUN_IDS,
            FeedColumn::StepIndices => sys::A2PACK_FEED_STEP_INDICES,
            FeedColumn::LegalMask => sys::A2PACK_FEED_LEGAL_MASK,
            FeedColumn::Indices => sys::A2PACK_FEED_INDICES,
            FeedColumn::Valid => sys::A2PACK_FEED_VALID,
            FeedColumn::Weights => sys::A2PACK_FEED_WEIGHTS,
        }
    }
}

/// The element type of the moves column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MovesDtype {
    /// `u8` (the default).
    #[default]
    U8,
    /// `i32`.
    I32,
    /// `i64` (what `torch.nn.functional.cross_entropy` takes).
    I64,
}

/// Page-locking of the ring (for asynchronous copies to a GPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Pin {
    /// Pin through a CUDA runtime the process already has (or
    /// `$A2PACK_CUDART`); plain memory otherwise.
    #[default]
    Auto,
    /// Plain memory.
    Off,
    /// As `Auto`, else load libcudart by name; or fail naming why.
    On,
}

/// Options of [`Feed::open`], as a typed builder.
///
/// ```
/// use a2pack::{FeedColumn, FeedOptions, MovesDtype};
/// let opts = FeedOptions::new()
///     .batch_size(256)
///     .depth(4)
///     .threads(2)
///     .columns(&[FeedColumn::Exponents, FeedColumn::Moves, FeedColumn::EvValues])
///     .moves_dtype(MovesDtype::I64)
///     .seed(7)
///     .rank(0, 1)
///     .epochs(2);
/// # let _ = opts;
/// ```
#[derive(Debug, Clone, Copy)]
pub struct FeedOptions {
    raw: sys::a2pack_feed_options,
}

impl Default for FeedOptions {
    fn default() -> Self {
        FeedOptions::new()
    }
}

impl FeedOptions {
    pub(crate) fn raw(&self) -> &sys::a2pack_feed_options {
        &self.raw
    }

    /// The library's defaults: batches of 4096 rows, depth 4, one producer
    /// thread, exponents + moves (u8) + legal + ev_values, seed 0,
    /// shuffled, short last batch kept, rank 0 of 1, no end.
    pub fn new() -> FeedOptions {
        let mut raw = sys::a2pack_feed_options::default();
        // SAFETY: fills the struct (size included).
        unsafe { sys::a2pack_feed_options_init(&mut raw) };
        FeedOptions { raw }
    }

    /// Rows of a global batch (all ranks together).
    pub fn batch_size(mut self, n: u64) -> Self {
        self.raw.batch_size = n;
        self
    }

    /// Batches filled ahead of the consumer (0: each batch is gathered
    /// inside `next`, on the calling thread).
    pub fn depth(mut self, n: u32) -> Self {
        self.raw.depth = n;
        self
    }

    /// Producer threads (each gathers whole batches).
    pub fn threads(mut self, n: u32) -> Self {
        self.raw.threads = n;
        self
    }

    /// Ring slots (0 = depth + 2; at least depth + 1).
    pub fn slots(mut self, n: u32) -> Self {
        self.raw.slots = n;
        self
    }

    /// The columns to fill ([`FeedColumn::Indices`] is always filled).
    pub fn columns(mut self, columns: &[FeedColumn]) -> Self {
        self.raw.columns = columns.iter().fold(0u32, |bits, c| bits | (1u32 << c.raw()));
        self
    }

    /// The element type the moves column is written in.
    pub fn moves_dtype(mut self, dtype: MovesDtype) -> Self {
        self.raw.moves_dtype = match dtype {
            MovesDtype::U8 => sys::A2PACK_FEED_DTYPE_U8,
            MovesDtype::I32 => sys::A2PACK_FEED_DTYPE_I32,
            MovesDtype::I64 => sys::A2PACK_FEED_DTYPE_I64,
        };
        self
    }

    /// The sampler's seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.raw.seed = seed;
        self
    }

    /// `true` (the default): each epoch in the index shuffle's order, a
    /// keyed bijection computed batch by batch (nothing stored); `false`:
    /// the rows in the order given, every epoch.
    pub fn shuffle(mut self, on: bool) -> Self {
        self.raw.shuffle =
            if on { sys::A2PACK_FEED_SHUFFLE_INDEX as i32 } else { sys::A2PACK_FEED_SHUFFLE_NONE as i32 };
        self
    }

    /// Each epoch in the stored permutation's order (a Fisher-Yates shuffle
    /// of (seed, epoch), 4 bytes a row, the order of [`crate::Sampler`]).
    pub fn stored_permutation(mut self) -> Self {
        self.raw.shuffle = sys::A2PACK_FEED_SHUFFLE_STORED as i32;
        self
    }

    /// Leave out an epoch's short last batch.
    pub fn drop_last(mut self, on: bool) -> Self {
        self.raw.drop_last = i32::from(on);
        self
    }

    /// This consumer's rank among `world` ranks sharing each global batch
    /// (each takes its contiguous part).
    pub fn rank(mut self, rank: u32, world: u32) -> Self {
        self.raw.rank = rank;
        self.raw.world = world;
        self
    }

    /// The feed ends before epoch `n` (0 = never).
    pub fn epochs(mut self, n: u64) -> Self {
        self.raw.epochs = n;
        self
    }

    /// The first epoch (a loaded state overrides it).
    pub fn start_epoch(mut self, epoch: u64) -> Self {
        self.raw.start_epoch = epoch;
        self
    }

    /// Page-locking of the ring.
    pub fn pin(mut self, pin: Pin) -> Self {
        self.raw.pin = match pin {
            Pin::Auto => sys::A2PACK_FEED_PIN_AUTO,
            Pin::Off => sys::A2PACK_FEED_PIN_OFF,
            Pin::On => sys::A2PACK_FEED_PIN_ON,
        };
        self
    }

    /// Keep the producer threads off the consumer's CPU (default `true`):
    /// their gathers then do not evict the training loop's caches between
    /// steps. `false`: they run on any CPU.
    pub fn spare_consumer_cpu(mut self, spare: bool) -> Self {
        self.raw.spare_consumer_cpu = i32::from(spare);
        self
    }

    /// Follow appends to the dataset (default `false`): a committed append
    /// is taken in at a batch soon after it commits ([`Feed::refresh`]: at
    /// once), its rows joining the endless orders at once and the epoch
    /// orders at the next epoch; never a row not committed. For every row
    /// of a single-file dataset ([`Feed::open`] without indices,
    /// `Feed::open_replay`) and for a sharded one ([`Feed::open_shards`]:
    /// appended shards join the block shuffle at the next epoch); a state
    /// saved over N rows resumes over N + k.
    pub fn live(mut self, live: bool) -> Self {
        self.raw.live = i32::from(live);
        self
    }

    /// Rate limiting of a live feed, as Reverb's `SampleToInsertRatio`: a
    /// batch is served once the dataset holds `min_size` rows and the units
    /// served before it are fewer than `samples_per_insert * (rows -
    /// min_size + 1)`; the next batch waits for appends meanwhile, and fails
    /// with `Status::Full` naming the limit after `timeout` (`None`: no end).
    pub fn rate_limit(mut self, samples_per_insert: f64, min_size: u64, timeout: Option<std::time::Duration>) -> Self {
        self.raw.samples_per_insert = samples_per_insert;
        self.raw.min_size = min_size;
        self.raw.rate_timeout_ms = timeout.map_or(-1, |t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX));
        self
    }
}

/// Counters of a feed ([`Feed::stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeedStats {
    /// Batches handed out since open.
    pub batches_served: u64,
    /// Rows handed out since open.
    pub rows_served: u64,
    /// Time `next` waited for a batch (producers behind).
    pub consumer_wait_ns: u64,
    /// Producer time spent waiting for a free slot (consumer behind).
    pub producer_idle_ns: u64,
    /// Producer time spent gathering.
    pub producer_busy_ns: u64,
    /// Epoch of the next batch `next` hands out.
    pub epoch: u64,
    /// Its index in that epoch.
    pub next_batch: u64,
    /// Global batches per epoch.
    pub batches_per_epoch: u64,
    /// Bytes of one ring slot.
    pub slot_bytes: u64,
    /// Producer threads.
    pub threads: u32,
    /// Batches filled ahead.
    pub depth: u32,
    /// Ring slots.
    pub slots: u32,
    /// Slots handed out and not yet released.
    pub held: u32,
    /// Slots filled and waiting for `next`.
    pub ready: u32,
    /// The ring is page-locked.
    pub pinned: bool,
    /// The sampler's seed (a loaded state's, after `load_state`).
    pub seed: u64,
    /// The CPU the producers keep off ([`FeedOptions::spare_consumer_cpu`]),
    /// if any.
    pub spared_cpu: Option<u32>,
}

/// Batches of a dataset for a training loop, gathered ahead by library
/// threads: an `Iterator<Item = Result<FeedBatch>>` in the epoch sampler's
/// order (the same batches as [`Sampler`](crate::Sampler) with the same
/// seed and batch size), epoch after epoch until
/// [`epochs`](FeedOptions::epochs).
///
/// The feed keeps the dataset's rows alive, so the [`Dataset`] may be
/// dropped first; batches stay valid after the feed is dropped. A feed is
/// `Send` (one thread at a time); its batches are `Send + Sync`.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).max_steps(20).write_dir(dir.path().join("runs"), 3, 1)?;
/// # a2pack::dataset::build(dir.path().join("runs"), dir.path().join("ds"), &Default::default(), None)?;
/// use a2pack::{Dataset, Feed, FeedOptions};
/// let ds = Dataset::open(dir.path().join("ds"))?;
/// let mut feed = Feed::open(&ds, None, &FeedOptions::new().batch_size(16).epochs(1).seed(3))?;
/// let mut rows = 0;
/// for batch in feed.by_ref() {
///     let batch = batch?;
///     assert_eq!(batch.exponents()?.len(), batch.len() * 16);
///     assert_eq!(batch.ev_values()?.len(), batch.len() * 4);
///     rows += batch.len();
/// }
/// assert_eq!(rows, ds.rows().len());
/// assert_eq!(feed.stats().rows_served as usize, rows);
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct Feed {
    raw: *mut sys::a2pack_feed,
    ended: bool,
    /// Steps per unit: T for a feed of windows, else 1.
    window: usize,
}

unsafe_send!(Feed);

impl Drop for Feed {
    fn drop(&mut self) {
        // SAFETY: owned handle, closed once; held batches stay valid.
        unsafe { sys::a2pack_feed_close(self.raw) }
    }
}

impl fmt::Debug for Feed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Feed").field("stats", &self.stats()).finish()
    }
}

impl Feed {
    /// Owns `raw`, a feed whose units are `window` consecutive rows.
    pub(crate) fn from_raw(raw: *mut sys::a2pack_feed, window: usize) -> Feed {
        Feed { raw, ended: false, window }
    }

    /// Open a feed over the rows `indices` of `ds` (copied), or over every
    /// row when `None`. Producer threads start at once.
    pub fn open(ds: &Dataset, indices: Option<&[usize]>, opts: &FeedOptions) -> Result<Feed> {
        let (ptr, n) = indices.map_or((std::ptr::null(), 0), |i| (positions_ptr(i), i.len() as u64));
        let mut out = std::ptr::null_mut();
        // SAFETY: valid dataset; n indices or NULL (copied); options sized by init.
        check(unsafe { sys::a2pack_feed_open(ds.as_ptr(), ptr, n, &opts.raw, &mut out) })?;
        Ok(Feed::from_raw(out, 1))
    }

    /// A feed over a [`Mix`] (copied) of `ds`'s rows: the mix's weighted
    /// global batches from its [`position`](Mix::position) on, without end
    /// (rank and world from `opts` take their part of each). The mix's batch
    /// size and seed are the feed's; `opts`' batch size, seed, shuffle,
    /// drop_last, epochs and start epoch do not apply. Checkpoints hold the
    /// mix's state.
    pub fn open_mix(ds: &Dataset, mix: &Mix, opts: &FeedOptions) -> Result<Feed> {
        let mut out = std::ptr::null_mut();
        // SAFETY: valid dataset and mix (copied); options sized by init.
        check(unsafe { sys::a2pack_feed_open_mix(ds.as_ptr(), mix.as_ptr(), mix.position(), &opts.raw, &mut out) })?;
        Ok(Feed::from_raw(out, 1))
    }

    /// A feed over a mix: mix with `weights` (one per source) from the next
    /// batch on; batches filled ahead are made again. Refused, the feed
    /// unchanged, for a feed over an epoch sampler or weights the mix
    /// refuses.
    pub fn set_weights(&mut self, weights: &[f64]) -> Result<()> {
        // SAFETY: weights.len() values read during the call.
        check(unsafe { sys::a2pack_feed_set_weights(self.raw, weights.as_ptr(), weights.len()) })
    }

    /// The next batch (`Ok(None)` at the end), waiting for it as long as it
    /// takes. `Status::Full` when the caller holds every slot of the ring.
    pub fn next_batch(&mut self) -> Result<Option<FeedBatch>> {
        let mut out = std::ptr::null_mut();
        // SAFETY: owned feed used through &mut (one thread at a time).
        check(unsafe { sys::a2pack_feed_next(self.raw, &mut out) })?;
        if out.is_null() {
            self.ended = true;
            return Ok(None);
        }
        FeedBatch::new(out, self.window).map(Some)
    }

    /// As [`next_batch`](Feed::next_batch), waiting at most `timeout`:
    /// `Ok(None)` when the wait timed out or at the end
    /// ([`ended`](Feed::ended) tells which).
    pub fn next_timeout(&mut self, timeout: std::time::Duration) -> Result<Option<FeedBatch>> {
        let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        let (mut out, mut ended) = (std::ptr::null_mut(), 0i32);
        // SAFETY: owned feed used through &mut.
        check(unsafe { sys::a2pack_feed_next_timeout(self.raw, ms, &mut out, &mut ended) })?;
        self.ended = ended != 0;
        if out.is_null() {
            return Ok(None);
        }
        FeedBatch::new(out, self.window).map(Some)
    }

    /// A live feed ([`FeedOptions::live`]): take in now what was appended
    /// and committed until this call, so that the next batch sees it; the
    /// rows the feed reads. Fails for a feed that is not live, and with
    /// what went wrong in opening the folder again (the dataset rebuilt or
    /// replaced by other rows, damaged), naming it.
    pub fn refresh(&mut self) -> Result<u64> {
        let mut rows = 0u64;
        // SAFETY: owned feed used through &mut (the consumer's thread).
        check(unsafe { sys::a2pack_feed_refresh(self.raw, &mut rows) })?;
        Ok(rows)
    }

    /// Steps per unit: T for a feed of windows
    /// ([`open_replay`](Feed::open_replay) with
    /// [`ReplayOptions::window`](crate::ReplayOptions::window)), else 1. Each
    /// batch says the same ([`FeedBatch::window`]).
    pub fn window(&self) -> usize {
        self.window
    }

    /// Whether a call found the end: every batch up to
    /// [`epochs`](FeedOptions::epochs) was handed out.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The feed's counters.
    pub fn stats(&self) -> FeedStats {
        let mut s =
            sys::a2pack_feed_stats { size: std::mem::size_of::<sys::a2pack_feed_stats>(), ..Default::default() };
        // SAFETY: size set; cannot fail on an open feed.
        let status = unsafe { sys::a2pack_feed_stats_get(self.raw, &mut s) };
        assert_eq!(status, 0, "a2pack_feed_stats_get failed on an open feed");
        FeedStats {
            batches_served: s.batches_served,
            rows_served: s.rows_served,
            consumer_wait_ns: s.consumer_wait_ns,
            producer_idle_ns: s.producer_idle_ns,
            producer_busy_ns: s.producer_busy_ns,
            epoch: s.epoch,
            next_batch: s.next_batch,
            batches_per_epoch: s.batches_per_epoch,
            slot_bytes: s.slot_bytes,
            threads: s.threads,
            depth: s.depth,
            slots: s.slots,
            held: s.held,
            ready: s.ready,
            pinned: s.pinned != 0,
            seed: s.seed,
            spared_cpu: u32::try_from(s.spared_cpu).ok(),
        }
    }

    /// A checkpoint: the position after the batches handed out so far, as a
    /// small versioned byte string for [`load_state`](Feed::load_state).
    pub fn state(&self) -> Result<Vec<u8>> {
        let (mut data, mut len) = (std::ptr::null_mut(), 0usize);
        // SAFETY: out receives owned memory of len bytes.
        check(unsafe { sys::a2pack_feed_state(self.raw, &mut data, &mut len) })?;
        // SAFETY: owned memory of len bytes.
        Ok(unsafe { take_owned(data, len) })
    }

    /// Move to a saved position: the next batch is the one after those
    /// handed out when `state` was taken. Refused, naming what differs,
    /// for a damaged state or one taken over another dataset, row set,
    /// batch size or shuffle setting (the feed is then unchanged).
    pub fn load_state(&mut self, state: &[u8]) -> Result<()> {
        // SAFETY: len bytes read during the call.
        check(unsafe { sys::a2pack_feed_load_state(self.raw, state.as_ptr().cast(), state.len()) })
    }
}

impl Iterator for Feed {
    type Item = Result<FeedBatch>;

    fn next(&mut self) -> Option<Result<FeedBatch>> {
        self.next_batch().transpose()
    }
}

/// Where a batch sits in the feed's sequence ([`FeedBatch::info`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeedBatchInfo {
    /// Its epoch.
    pub epoch: u64,
    /// Index of the global batch in its epoch.
    pub batch: u64,
    /// This rank's rows of it (may be 0 when world > rows).
    pub rows: u64,
    /// Rows of the global batch (all ranks).
    pub global_rows: u64,
    /// Batches per epoch × epoch + batch.
    pub sequence: u64,
}

/// The moves column, in the feed's [`MovesDtype`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moves<'a> {
    /// `MovesDtype::U8`.
    U8(&'a [u8]),
    /// `MovesDtype::I32`.
    I32(&'a [i32]),
    /// `MovesDtype::I64`.
    I64(&'a [i64]),
}

impl Moves<'_> {
    /// Rows.
    pub fn len(&self) -> usize {
        match self {
            Moves::U8(m) => m.len(),
            Moves::I32(m) => m.len(),
            Moves::I64(m) => m.len(),
        }
    }

    /// No rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Move `i` as a `u8` (0..3).
    pub fn get(&self, i: usize) -> Option<u8> {
        match self {
            Moves::U8(m) => m.get(i).copied(),
            Moves::I32(m) => m.get(i).map(|&v| v as u8),
            Moves::I64(m) => m.get(i).map(|&v| v as u8),
        }
    }
}

/// A batch's column as a DLPack tensor (`DLManagedTensorVersioned`) with a
/// reference to its ring slot of its own, released on drop.
pub struct DlpackColumn(std::ptr::NonNull<sys::DLManagedTensorVersioned>);

// SAFETY: the tensor's deleter may run on any thread (the header's feed
// section), and its memory never changes while the slot is held.
unsafe_send!(DlpackColumn);
unsafe_sync!(DlpackColumn);

impl DlpackColumn {
    /// The tensor: data, device, dtype, shape (C-contiguous, strides null).
    pub fn tensor(&self) -> &sys::DLTensor {
        // SAFETY: the tensor lives until this value's drop or into_raw.
        unsafe { &self.0.as_ref().dl_tensor }
    }

    /// Its shape, as the batch's [`FeedBatch::shape`].
    pub fn shape(&self) -> &[i64] {
        let t = self.tensor();
        // SAFETY: `ndim` values, owned by the tensor.
        unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }
    }

    /// The managed tensor for a framework that takes DLPack, which must
    /// call its deleter once when done.
    pub fn into_raw(self) -> *mut sys::DLManagedTensorVersioned {
        let t = self.0.as_ptr();
        std::mem::forget(self);
        t
    }
}

impl fmt::Debug for DlpackColumn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DlpackColumn").field("shape", &self.shape()).finish()
    }
}

impl Drop for DlpackColumn {
    fn drop(&mut self) {
        let t = self.0.as_ptr();
        // SAFETY: this value's own tensor, deleted once.
        unsafe {
            if let Some(delete) = (*t).deleter {
                delete(t)
            }
        }
    }
}

/// One batch of a [`Feed`]: a reference to its ring slot, released on
/// drop. Columns are slices into the slot, valid while the batch lives;
/// `Clone` takes another reference to the same slot.
///
/// ```compile_fail
/// # fn f(feed: &mut a2pack::Feed) -> a2pack::Result<()> {
/// let ev = {
///     let batch = feed.next_batch()?.unwrap();
///     batch.ev_values()?   // borrows `batch`, which is dropped here
/// };
/// println!("{}", ev[0]);
/// # Ok(()) }
/// ```
pub struct FeedBatch {
    raw: *mut sys::a2pack_feed_batch,
    info: FeedBatchInfo,
    window: usize,
}

// SAFETY: releasing, retaining and reading batches is thread-safe (the
// header's feed section), and a batch's columns never change while held.
unsafe_send!(FeedBatch);
unsafe_sync!(FeedBatch);

impl Drop for FeedBatch {
    fn drop(&mut self) {
        // SAFETY: this batch's own reference, dropped once.
        unsafe { sys::a2pack_feed_batch_release(self.raw) }
    }
}

impl Clone for FeedBatch {
    fn clone(&self) -> Self {
        // SAFETY: a held batch; the new value owns the added reference.
        unsafe { sys::a2pack_feed_batch_retain(self.raw) };
        FeedBatch { raw: self.raw, info: self.info, window: self.window }
    }
}

impl fmt::Debug for FeedBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FeedBatch").field("info", &self.info).field("window", &self.window).finish()
    }
}

impl FeedBatch {
    /// Takes ownership of the reference `raw` holds; its units are `window`
    /// consecutive rows.
    fn new(raw: *mut sys::a2pack_feed_batch, window: usize) -> Result<FeedBatch> {
        let mut batch = FeedBatch { raw, info: FeedBatchInfo::default(), window };
        let mut i = sys::a2pack_feed_batch_info {
            size: std::mem::size_of::<sys::a2pack_feed_batch_info>(),
            ..Default::default()
        };
        // SAFETY: a held batch; size set. On failure `batch` releases it.
        check(unsafe { sys::a2pack_feed_batch_get_info(raw, &mut i) })?;
        batch.info = FeedBatchInfo {
            epoch: i.epoch,
            batch: i.batch,
            rows: i.rows,
            global_rows: i.global_rows,
            sequence: i.sequence,
        };
        Ok(batch)
    }

    /// Its place in the feed's sequence.
    pub fn info(&self) -> FeedBatchInfo {
        self.info
    }

    /// This rank's rows of the batch.
    pub fn len(&self) -> usize {
        self.info.rows as usize
    }

    /// No rows (a rank whose part of a short batch is empty).
    pub fn is_empty(&self) -> bool {
        self.info.rows == 0
    }

    /// Steps per unit, as its feed's [`Feed::window`]: T when the batch holds
    /// windows, else 1. Window `i` is rows `i * T .. (i + 1) * T`, so every
    /// column is `[windows, T, ...]` in C order, and
    /// `chunks_exact(T * width)` of a column's slice walks the windows.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).max_steps(40).write_dir(dir.path().join("runs"), 4, 1)?;
    /// # a2pack::dataset::build(dir.path().join("runs"), dir.path().join("ds"), &Default::default(), None)?;
    /// use a2pack::{Dataset, Feed, FeedColumn, FeedOptions, ReplayOptions};
    /// let ds = Dataset::open(dir.path().join("ds"))?;
    /// let opts = FeedOptions::new().batch_size(4).columns(&[FeedColumn::Exponents]);
    /// let mut feed = Feed::open_replay(&ds, &ReplayOptions::new().window(8), None, &opts)?;
    /// let batch = feed.next_batch()?.unwrap();
    /// assert_eq!((batch.windows(), batch.window()), (4, 8));
    /// assert_eq!(batch.shape(FeedColumn::Exponents)?, [4, 8, 16]);
    /// for window in batch.exponents()?.chunks_exact(batch.window() * 16) {
    ///     assert_eq!(window.len(), 8 * 16); // 8 consecutive steps of one run
    /// }
    /// # Ok::<(), a2pack::Error>(())
    /// ```
    pub fn window(&self) -> usize {
        self.window
    }

    /// Units of this rank's part of the batch: windows of
    /// [`window`](FeedBatch::window) rows each, or rows when the window is 1.
    pub fn windows(&self) -> usize {
        self.len() / self.window
    }

    /// The shape of `column` in this batch, units first: `[windows, T]` or
    /// `[windows, T, width]` for a feed of windows, `[rows]` or
    /// `[rows, width]` otherwise (as the Python binding shapes its arrays).
    /// `Status::NotFound` for a column the feed does not fill.
    pub fn shape(&self, column: FeedColumn) -> Result<Vec<usize>> {
        let v = self.column_view(column)?;
        let mut shape =
            if self.window > 1 { vec![v.rows as usize / self.window, self.window] } else { vec![v.rows as usize] };
        if v.ndim > 1 {
            shape.push(v.width as usize);
        }
        Ok(shape)
    }

    /// The raw handle, for calls through `a2pack-sys` (still owned by `self`).
    pub fn as_ptr(&self) -> *const sys::a2pack_feed_batch {
        self.raw
    }

    /// Whether the slot's memory is page-locked for CUDA.
    pub fn pinned(&self) -> bool {
        self.column_view(FeedColumn::Indices).is_ok_and(|v| v.pinned != 0)
    }

    /// `columns` as DLPack tensors, each holding the slot itself: the slot
    /// goes back to the producers when this batch and every tensor are gone
    /// (a tensor handed to a framework with [`DlpackColumn::into_raw`] goes
    /// when the framework calls its deleter). All or nothing:
    /// `Status::NotFound` for a column the feed does not fill.
    pub fn dlpack(&self, columns: &[FeedColumn]) -> Result<Vec<DlpackColumn>> {
        let raw: Vec<sys::a2pack_feed_column> = columns.iter().map(|c| c.raw()).collect();
        let mut out = vec![std::ptr::null_mut(); raw.len()];
        // SAFETY: a held batch; `out` has room for one tensor per column.
        check(unsafe { sys::a2pack_feed_batch_dlpack(self.raw, raw.as_ptr(), raw.len(), out.as_mut_ptr()) })?;
        Ok(out.into_iter().map(|t| DlpackColumn(std::ptr::NonNull::new(t).expect("made"))).collect())
    }

    fn column_view(&self, column: FeedColumn) -> Result<sys::a2pack_feed_column_view> {
        let mut v = sys::a2pack_feed_column_view {
            size: std::mem::size_of::<sys::a2pack_feed_column_view>(),
            data: std::ptr::null_mut(),
            ..Default::default()
        };
        // SAFETY: a held batch; size set.
        check(unsafe { sys::a2pack_feed_batch_column(self.raw, column.raw(), &mut v) })?;
        Ok(v)
    }

    /// Column `column` as a slice of `T` (`width` values per row), checking
    /// the library's dtype against `T`'s.
    fn column<T>(&self, column: FeedColumn, dtypes: &[sys::a2pack_feed_dtype], width: u64) -> Result<&[T]> {
        let v = self.column_view(column)?;
        if !dtypes.contains(&v.dtype)
            || v.width != width
            || v.nbytes != v.rows * width * std::mem::size_of::<T>() as u64
        {
            return Err(Error::new(
                Status::Internal,
                format!(
                    "feed column {column:?}: dtype {} width {} ({} bytes for {} rows) is not what the crate reads",
                    v.dtype, v.width, v.nbytes, v.rows
                ),
            ));
        }
        // SAFETY: rows × width elements of T (checked above), 64-byte
        // aligned, valid and unchanged while this batch holds its slot; the
        // slice borrows `self`.
        Ok(unsafe { view(v.data.cast::<T>().cast_const(), (v.rows * width) as usize) })
    }

    /// Tile exponents, 16 per row (cell 0 first).
    pub fn exponents(&self) -> Result<&[u8]> {
        self.column(FeedColumn::Exponents, &[sys::A2PACK_FEED_DTYPE_U8], 16)
    }

    /// The chosen moves, in the feed's [`MovesDtype`].
    pub fn moves(&self) -> Result<Moves<'_>> {
        let v = self.column_view(FeedColumn::Moves)?;
        Ok(match v.dtype {
            sys::A2PACK_FEED_DTYPE_I32 => Moves::I32(self.column(FeedColumn::Moves, &[v.dtype], 1)?),
            sys::A2PACK_FEED_DTYPE_I64 => Moves::I64(self.column(FeedColumn::Moves, &[v.dtype], 1)?),
            _ => Moves::U8(self.column(FeedColumn::Moves, &[sys::A2PACK_FEED_DTYPE_U8], 1)?),
        })
    }

    /// 4 per row: 1 where the move is legal, else 0.
    pub fn legal(&self) -> Result<&[u8]> {
        self.column(FeedColumn::Legal, &[sys::A2PACK_FEED_DTYPE_BOOL, sys::A2PACK_FEED_DTYPE_U8], 4)
    }

    /// 4 values per row.
    pub fn ev_values(&self) -> Result<&[f32]> {
        self.column(FeedColumn::EvValues, &[sys::A2PACK_FEED_DTYPE_F32], 4)
    }

    /// The packed boards.
    pub fn boards(&self) -> Result<&[u64]> {
        self.column(FeedColumn::Boards, &[sys::A2PACK_FEED_DTYPE_U64], 1)
    }

    /// Run ids.
    pub fn run_ids(&self) -> Result<&[u32]> {
        self.column(FeedColumn::RunIds, &[sys::A2PACK_FEED_DTYPE_U32], 1)
    }

    /// Step indices within their runs.
    pub fn step_indices(&self) -> Result<&[u16]> {
        self.column(FeedColumn::StepIndices, &[sys::A2PACK_FEED_DTYPE_U16], 1)
    }

    /// ev_legal bitmasks.
    pub fn legal_mask(&self) -> Result<&[u8]> {
        self.column(FeedColumn::LegalMask, &[sys::A2PACK_FEED_DTYPE_U8], 1)
    }

    /// The dataset rows of the batch (positions, as [`Dataset::gather`]
    /// takes them); always filled.
    pub fn indices(&self) -> Result<&[usize]> {
        const _: () = assert!(std::mem::size_of::<usize>() == std::mem::size_of::<i64>());
        // The library's int64 positions are non-negative: read as usize.
        self.column(FeedColumn::Indices, &[sys::A2PACK_FEED_DTYPE_I64], 1)
    }

    /// 1 for a real step, 0 for padding (replay feeds with `pad_short`).
    pub fn valid(&self) -> Result<&[u8]> {
        self.column(FeedColumn::Valid, &[sys::A2PACK_FEED_DTYPE_BOOL], 1)
    }

    /// Importance weights (prioritized replay feeds; 1 otherwise).
    pub fn weights(&self) -> Result<&[f32]> {
        self.column(FeedColumn::Weights, &[sys::A2PACK_FEED_DTYPE_F32], 1)
    }
}

//! Packfiles: many runs in one read-only file with an index.

use std::ffi::{c_char, c_void, CStr};
use std::fmt;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use a2pack_sys as sys;

use crate::error::{check, Error, Result, Status};
use crate::ffi::{path_cstr, take_owned, unsafe_send, unsafe_sync, view, with_progress, CPaths};
use crate::run::{Run, RunBatch, RunKind};

/// Options of [`Pack::open_with`].
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let runs = dir.path().join("runs");
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(30).write_dir(&runs, 4, 1)?;
/// # let path = dir.path().join("runs.a2pack");
/// # a2pack::pack_dir(&runs, &path, a2pack::PackWriterOptions::new(), None)?;
/// let pack = a2pack::Pack::open_with(&path, &a2pack::PackOptions::new().mmap(false).verify_crc(true))?;
/// assert_eq!(pack.get_slice(0).unwrap_err().status(), a2pack::Status::Unsupported); // not mapped
/// assert!(!pack.read(0)?.is_empty());
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct PackOptions {
    raw: sys::a2pack_pack_options,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions::new()
    }
}

impl PackOptions {
    /// The defaults: memory-mapped, entry CRCs checked.
    pub fn new() -> PackOptions {
        let mut raw = sys::a2pack_pack_options::default();
        // SAFETY: fills the struct.
        unsafe { sys::a2pack_pack_options_init(&mut raw) };
        PackOptions { raw }
    }

    /// Map the file (`true`, default) or read with pread (`false`; no slices).
    pub fn mmap(mut self, on: bool) -> Self {
        self.raw.use_mmap = i32::from(on);
        self
    }

    /// Check each entry's stored CRC32C on read (default `true`).
    pub fn verify_crc(mut self, on: bool) -> Self {
        self.raw.verify_crc = i32::from(on);
        self
    }
}

/// Flags of the read calls.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let runs = dir.path().join("runs");
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(30).write_dir(&runs, 4, 1)?;
/// # let path = dir.path().join("runs.a2pack");
/// # a2pack::pack_dir(&runs, &path, a2pack::PackWriterOptions::new(), None)?;
/// let pack = a2pack::Pack::open(&path)?;
/// let run = pack.decode_with(0, a2pack::ReadFlags::NO_VERIFY)?; // trusted scan: no CRC check
/// assert_eq!(run, pack.decode(0)?);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadFlags(pub u32);

impl ReadFlags {
    /// Check the entry CRC (unless the pack was opened without).
    pub const DEFAULT: ReadFlags = ReadFlags(0);
    /// Skip the entry CRC check for this call (trusted sequential scans).
    pub const NO_VERIFY: ReadFlags = ReadFlags(sys::A2PACK_PACK_NO_VERIFY);
}

/// Index entry of a pack, as stored.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let runs = dir.path().join("runs");
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(30).write_dir(&runs, 4, 1)?;
/// # let path = dir.path().join("runs.a2pack");
/// # a2pack::pack_dir(&runs, &path, a2pack::PackWriterOptions::new(), None)?;
/// let e = a2pack::Pack::open(&path)?.entry(0)?;
/// assert_eq!((e.kind, e.zstd, e.lz4, e.length, e.offset % 4096), (2, false, false, e.raw_length, 0));
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackEntry {
    /// Absolute file offset of the stored bytes.
    pub offset: u64,
    /// Stored bytes.
    pub length: u32,
    /// 1 = v1, 2 = v2, as the index says.
    pub kind: u16,
    /// Whether the payload is one zstd frame.
    pub zstd: bool,
    /// Whether the payload is one LZ4 frame.
    pub lz4: bool,
    /// CRC32C of the stored bytes (0 = none).
    pub crc32c: u32,
    /// Bytes of the run file after decompression.
    pub raw_length: u32,
}

/// Run-length statistics of a pack.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let runs = dir.path().join("runs");
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(30).write_dir(&runs, 4, 1)?;
/// # let path = dir.path().join("runs.a2pack");
/// # a2pack::pack_dir(&runs, &path, a2pack::PackWriterOptions::new(), None)?;
/// let s = a2pack::Pack::open(&path)?.stats(0)?;
/// assert!(s.count == 4 && s.min_len <= s.p50 && s.p50 <= s.max_len && s.max_len <= 30);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PackStats {
    /// Entries.
    pub count: u64,
    /// Sum of the runs' meta.steps.
    pub total_steps: u64,
    /// Shortest run.
    pub min_len: u32,
    /// Longest run.
    pub max_len: u32,
    /// Mean length.
    pub mean_len: f64,
    /// Median length.
    pub p50: u32,
    /// 90th percentile.
    pub p90: u32,
    /// 99th percentile.
    pub p99: u32,
    /// Read from the pack's stats block (else computed).
    pub from_block: bool,
}

/// Highest-tile and engine histograms of a pack (owned copies).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let runs = dir.path().join("runs");
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(30).write_dir(&runs, 4, 1)?;
/// # let path = dir.path().join("runs.a2pack");
/// # a2pack::pack_dir(&runs, &path, a2pack::PackWriterOptions::new(), None)?;
/// let h = a2pack::Pack::open(&path)?.histograms(0)?;
/// assert_eq!(h.engines.iter().map(|e| e.1).sum::<u64>(), 4);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PackHistograms {
    /// (highest tile value, runs), ascending by tile.
    pub tiles: Vec<(u32, u64)>,
    /// (engine string or `None`, runs): "none" first, then by bytes.
    pub engines: Vec<(Option<String>, u64)>,
}

/// JSONL export modes (upstream's schemas).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let runs = dir.path().join("runs");
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(30).write_dir(&runs, 4, 1)?;
/// # let path = dir.path().join("runs.a2pack");
/// # a2pack::pack_dir(&runs, &path, a2pack::PackWriterOptions::new(), None)?;
/// let pack = a2pack::Pack::open(&path)?;
/// let out = dir.path().join("steps.jsonl");
/// pack.to_jsonl(&out, a2pack::JsonlMode::Steps, 1, None)?;
/// let lines = std::fs::read_to_string(&out).unwrap().lines().count() as u64;
/// assert_eq!(lines, pack.stats(0)?.total_steps);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonlMode {
    /// One line per run.
    Runs,
    /// One line per step.
    Steps,
}

/// An open packfile. Thread-safe (`Send + Sync`): the header lets every
/// reader function be called from several threads at once.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let runs = dir.path().join("runs");
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(30).write_dir(&runs, 4, 1)?;
/// # let path = dir.path().join("runs.a2pack");
/// # a2pack::pack_dir(&runs, &path, a2pack::PackWriterOptions::new(), None)?;
/// let pack = a2pack::Pack::open(&path)?;
/// println!("{} runs, {} steps", pack.len(), pack.stats(0)?.total_steps);
/// let run = pack.decode(0)?;
/// let batch = pack.decode_batch(&[0, 1, 2], 0)?;
/// # Ok::<(), a2pack::Error>(())
/// ```
///
/// A slice borrows the pack, so it cannot outlive it:
///
/// ```compile_fail,E0597
/// let slice = {
///     let pack = a2pack::Pack::open("runs.a2pack").unwrap();
///     pack.get_slice(0).unwrap()
/// }; // error: `pack` does not live long enough
/// println!("{}", slice.len());
/// ```
pub struct Pack {
    raw: *mut sys::a2pack_pack,
    path: PathBuf,
}

unsafe_send!(Pack);
unsafe_sync!(Pack);

impl Drop for Pack {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_pack_close(self.raw) }
    }
}

impl fmt::Debug for Pack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pack").field("path", &self.path).field("len", &self.len()).finish()
    }
}

fn out_of_range(path: &Path, i: u64, len: u64) -> Error {
    Error::new(Status::OutOfRange, format!("{}: entry {i} of {len}", path.display()))
}

impl Pack {
    /// Open a pack with the default options (checks header, footer, index).
    pub fn open(path: impl AsRef<Path>) -> Result<Pack> {
        Pack::open_with(path, &PackOptions::new())
    }

    /// Open a pack with options.
    pub fn open_with(path: impl AsRef<Path>, opts: &PackOptions) -> Result<Pack> {
        let c = path_cstr(path.as_ref())?;
        let mut out = std::ptr::null_mut();
        // SAFETY: valid path and options; out receives an owned pack.
        check(unsafe { sys::a2pack_pack_open(c.as_ptr(), &opts.raw, &mut out) })?;
        Ok(Pack { raw: out, path: path.as_ref().to_path_buf() })
    }

    /// The raw handle (still owned by `self`).
    pub fn as_ptr(&self) -> *mut sys::a2pack_pack {
        self.raw
    }

    /// Number of entries.
    pub fn len(&self) -> u64 {
        // SAFETY: valid handle.
        unsafe { sys::a2pack_pack_len(self.raw) }
    }

    /// Whether the pack has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Index entry `i` (no payload is read).
    pub fn entry(&self, i: u64) -> Result<PackEntry> {
        let mut e =
            sys::a2pack_pack_entry { size: std::mem::size_of::<sys::a2pack_pack_entry>(), ..Default::default() };
        // SAFETY: size set.
        check(unsafe { sys::a2pack_pack_entry_info(self.raw, i, &mut e) })?;
        Ok(PackEntry {
            offset: e.offset,
            length: e.length,
            kind: e.kind,
            zstd: u32::from(e.flags) == sys::A2PACK_PACK_ENTRY_ZSTD,
            lz4: u32::from(e.flags) == sys::A2PACK_PACK_ENTRY_LZ4,
            crc32c: e.crc32c,
            raw_length: e.raw_length,
        })
    }

    /// Run format of entry `i` by the index.
    pub fn kind(&self, i: u64) -> Result<RunKind> {
        let mut k = 0;
        // SAFETY: valid handle.
        check(unsafe { sys::a2pack_pack_kind(self.raw, i, &mut k) })?;
        Ok(RunKind::from_raw(k))
    }

    /// Zero-copy view of entry `i`'s stored bytes (CRC checked), borrowed
    /// from the pack. Needs a mapped pack.
    pub fn get_slice(&self, i: u64) -> Result<&[u8]> {
        self.get_slice_with(i, ReadFlags::DEFAULT)
    }

    /// As [`Pack::get_slice`] with read flags.
    pub fn get_slice_with(&self, i: u64, flags: ReadFlags) -> Result<&[u8]> {
        let (mut data, mut len) = (std::ptr::null(), 0usize);
        // SAFETY: valid handle; the view lives until the pack is closed,
        // which the returned borrow of `self` prevents.
        check(unsafe { sys::a2pack_pack_get_slice(self.raw, i, flags.0, &mut data, &mut len) })?;
        // SAFETY: as above.
        Ok(unsafe { view(data, len) })
    }

    /// Entry `i`'s run-file bytes exactly as packed (decompressed).
    pub fn read(&self, i: u64) -> Result<Vec<u8>> {
        let (mut data, mut len) = (std::ptr::null_mut(), 0usize);
        // SAFETY: valid handle; data receives owned memory.
        check(unsafe { sys::a2pack_pack_read(self.raw, i, 0, &mut data, &mut len) })?;
        // SAFETY: owned memory of len bytes.
        Ok(unsafe { take_owned(data, len) })
    }

    /// Decode entry `i`.
    pub fn decode(&self, i: u64) -> Result<Run> {
        self.decode_with(i, ReadFlags::DEFAULT)
    }

    /// Decode entry `i` with read flags.
    pub fn decode_with(&self, i: u64, flags: ReadFlags) -> Result<Run> {
        let mut out = std::ptr::null_mut();
        // SAFETY: valid handle; out receives an owned run.
        check(unsafe { sys::a2pack_pack_decode(self.raw, i, flags.0, &mut out) })?;
        // SAFETY: owned, non-NULL on success.
        Ok(unsafe { Run::from_raw(out) })
    }

    /// Decode entries `indices` in parallel (`workers`: 0 = all cores).
    pub fn decode_runs(&self, indices: &[u64], workers: u32) -> Result<Vec<Run>> {
        let mut out: Vec<*mut sys::a2pack_run> = vec![std::ptr::null_mut(); indices.len()];
        // SAFETY: out has room for n runs.
        check(unsafe {
            sys::a2pack_pack_decode_runs(self.raw, indices.as_ptr(), indices.len(), workers, 0, out.as_mut_ptr())
        })?;
        // SAFETY: every entry is an owned run on success.
        Ok(out.into_iter().map(|r| unsafe { Run::from_raw(r) }).collect())
    }

    /// Decode entries `indices` into one columnar batch.
    pub fn decode_batch(&self, indices: &[u64], workers: u32) -> Result<RunBatch> {
        self.decode_batch_with(indices, workers, ReadFlags::DEFAULT)
    }

    /// As [`Pack::decode_batch`] with read flags.
    pub fn decode_batch_with(&self, indices: &[u64], workers: u32, flags: ReadFlags) -> Result<RunBatch> {
        let mut out = std::ptr::null_mut();
        // SAFETY: n indices; out receives an owned batch.
        check(unsafe {
            sys::a2pack_pack_decode_batch(self.raw, indices.as_ptr(), indices.len(), workers, flags.0, &mut out)
        })?;
        // SAFETY: owned, non-NULL on success.
        Ok(unsafe { RunBatch::from_raw(out) })
    }

    /// The order of an epoch: `0..len`, or a permutation depending only on
    /// (len, seed) when `shuffle`.
    pub fn permutation(&self, shuffle: bool, seed: u64) -> Result<Vec<u64>> {
        let len = usize::try_from(self.len()).map_err(|_| out_of_range(&self.path, self.len(), self.len()))?;
        let mut out = vec![0u64; len];
        // SAFETY: out has room for len entries.
        check(unsafe { sys::a2pack_pack_permutation(self.raw, i32::from(shuffle), seed, out.as_mut_ptr(), len) })?;
        Ok(out)
    }

    /// An epoch in batches of columnar runs.
    pub fn iter(&self, opts: &PackIterOptions) -> Result<PackIter> {
        let mut out = std::ptr::null_mut();
        // SAFETY: the pack is thread-safe; the iterator keeps the file open.
        check(unsafe { sys::a2pack_pack_iter_open(self.raw, &opts.raw, &mut out) })?;
        Ok(PackIter { raw: out })
    }

    /// Run-length statistics (the stats block, or computed once).
    pub fn stats(&self, workers: u32) -> Result<PackStats> {
        let mut s =
            sys::a2pack_pack_stats { size: std::mem::size_of::<sys::a2pack_pack_stats>(), ..Default::default() };
        // SAFETY: the pack is thread-safe; size set.
        check(unsafe { sys::a2pack_pack_stats_get(self.raw, workers, &mut s) })?;
        Ok(PackStats {
            count: s.count,
            total_steps: s.total_steps,
            min_len: s.min_len,
            max_len: s.max_len,
            mean_len: s.mean_len,
            p50: s.p50,
            p90: s.p90,
            p99: s.p99,
            from_block: s.from_block != 0,
        })
    }

    /// Highest-tile and engine histograms.
    pub fn histograms(&self, workers: u32) -> Result<PackHistograms> {
        let mut h = sys::a2pack_pack_histograms {
            size: std::mem::size_of::<sys::a2pack_pack_histograms>(),
            ..Default::default()
        };
        // SAFETY: size set; the views are copied at once.
        check(unsafe { sys::a2pack_pack_histograms_get(self.raw, workers, &mut h) })?;
        // SAFETY: arrays of the documented lengths, valid while the pack lives.
        unsafe {
            let tiles = view(h.tile_values, h.n_tiles)
                .iter()
                .copied()
                .zip(view(h.tile_counts, h.n_tiles).iter().copied())
                .collect();
            let offsets = view(h.engine_offsets, h.n_engines + 1);
            let total = offsets.last().copied().unwrap_or(0) as usize;
            let bytes = view(h.engine_bytes.cast::<u8>(), total);
            let present = view(h.engine_present, h.n_engines);
            let counts = view(h.engine_counts, h.n_engines);
            let engines = (0..h.n_engines)
                .map(|e| {
                    let name = (present[e] != 0).then(|| {
                        String::from_utf8_lossy(&bytes[offsets[e] as usize..offsets[e + 1] as usize]).into_owned()
                    });
                    (name, counts[e])
                })
                .collect();
            Ok(PackHistograms { tiles, engines })
        }
    }

    /// Validate (`full`: every entry decoded, every CRC checked). `progress`
    /// returns `false` to stop.
    pub fn validate(&self, full: bool, workers: u32, progress: Option<&mut dyn FnMut(u64, u64) -> bool>) -> Result<()> {
        with_progress(progress, |cb, user| {
            // SAFETY: the pack is thread-safe; the callback pair is alive.
            check(unsafe { sys::a2pack_pack_validate(self.raw, i32::from(full), workers, cb, user) })
        })
    }

    /// The index as an Arrow record batch (one copy).
    pub fn arrow_entries(&self) -> Result<crate::arrow::RecordBatch> {
        // SAFETY: valid pack.
        crate::arrow::export(|s, a| unsafe { sys::a2pack_pack_export_arrow_entries(self.raw, s, a) })
    }

    /// The stats (one row) and highest-tile histogram as Arrow record batches.
    pub fn arrow_stats(&self, workers: u32) -> Result<(crate::arrow::RecordBatch, crate::arrow::RecordBatch)> {
        use crate::arrow::{Array, RecordBatch, Schema};
        let mut stats = RecordBatch { schema: Schema::empty(), array: Array::empty() };
        let mut hist = RecordBatch { schema: Schema::empty(), array: Array::empty() };
        // SAFETY: the pack is thread-safe; four outputs, released by their owners.
        check(unsafe {
            sys::a2pack_pack_export_arrow_stats(
                self.raw,
                workers,
                &mut stats.schema.raw,
                &mut stats.array.raw,
                &mut hist.schema.raw,
                &mut hist.array.raw,
            )
        })?;
        Ok((stats, hist))
    }

    /// The runs (every entry, or `entries`) as an Arrow stream, decoded
    /// `batch_runs` at a time (0 = 1024) as the consumer asks.
    pub fn arrow_stream(
        &self,
        layout: crate::arrow::Layout,
        entries: Option<&[u64]>,
        batch_runs: usize,
        workers: u32,
        flags: ReadFlags,
    ) -> Result<crate::arrow::Stream> {
        let (p, n) = entries.map_or((std::ptr::null(), 0), |e| (e.as_ptr(), e.len()));
        // SAFETY: n entries or NULL (copied).
        crate::arrow::Stream::fill(|out| unsafe {
            sys::a2pack_pack_export_arrow_stream(self.raw, layout.raw(), p, n, batch_runs, workers, flags.0, out)
        })
    }

    /// Write every entry as JSONL to `path` (atomically); returns the bytes written.
    pub fn to_jsonl(
        &self,
        path: impl AsRef<Path>,
        mode: JsonlMode,
        workers: u32,
        progress: Option<&mut dyn FnMut(u64, u64) -> bool>,
    ) -> Result<u64> {
        let c = path_cstr(path.as_ref())?;
        let mode = match mode {
            JsonlMode::Runs => sys::A2PACK_PACK_JSONL_RUNS,
            JsonlMode::Steps => sys::A2PACK_PACK_JSONL_STEPS,
        };
        let mut bytes = 0u64;
        with_progress(progress, |cb, user| {
            // SAFETY: valid path; the callback pair is alive.
            check(unsafe { sys::a2pack_pack_to_jsonl(self.raw, c.as_ptr(), mode, workers, 0, cb, user, &mut bytes) })
        })?;
        Ok(bytes)
    }
}

/// Options of [`Pack::iter`].
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let runs = dir.path().join("runs");
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(30).write_dir(&runs, 4, 1)?;
/// # let path = dir.path().join("runs.a2pack");
/// # a2pack::pack_dir(&runs, &path, a2pack::PackWriterOptions::new(), None)?;
/// let pack = a2pack::Pack::open(&path)?;
/// let opts = a2pack::PackIterOptions::new().batch_size(3).workers(1).flags(a2pack::ReadFlags::NO_VERIFY);
/// let sizes: Vec<usize> = pack.iter(&opts)?.map(|b| b.map(|b| b.indices.len())).collect::<Result<_, _>>()?;
/// assert_eq!(sizes, vec![3, 1]);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct PackIterOptions {
    raw: sys::a2pack_pack_iter_options,
}

impl Default for PackIterOptions {
    fn default() -> Self {
        PackIterOptions::new()
    }
}

impl PackIterOptions {
    /// Defaults: batches of 256 runs in pack order.
    pub fn new() -> PackIterOptions {
        let mut raw = sys::a2pack_pack_iter_options::default();
        // SAFETY: fills the struct.
        unsafe { sys::a2pack_pack_iter_options_init(&mut raw) };
        PackIterOptions { raw }
    }

    /// Runs per batch.
    pub fn batch_size(mut self, n: u64) -> Self {
        self.raw.batch_size = n;
        self
    }

    /// Shuffle with `seed` (the order of [`Pack::permutation`]).
    pub fn shuffle(mut self, seed: u64) -> Self {
        self.raw.shuffle = 1;
        self.raw.seed = seed;
        self
    }

    /// Decode threads per batch (0 = all cores).
    pub fn workers(mut self, n: u32) -> Self {
        self.raw.workers = n;
        self
    }

    /// Read flags of every batch.
    pub fn flags(mut self, flags: ReadFlags) -> Self {
        self.raw.flags = flags.0;
        self
    }
}

/// One batch of an epoch: the runs and their entry indices.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let runs = dir.path().join("runs");
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(30).write_dir(&runs, 4, 1)?;
/// # let path = dir.path().join("runs.a2pack");
/// # a2pack::pack_dir(&runs, &path, a2pack::PackWriterOptions::new(), None)?;
/// let pack = a2pack::Pack::open(&path)?;
/// let first = pack.iter(&a2pack::PackIterOptions::new().batch_size(2))?.next().unwrap()?;
/// assert_eq!((first.indices, first.runs.len()), (vec![0, 1], 2));
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug)]
pub struct PackBatch {
    /// The decoded runs.
    pub runs: RunBatch,
    /// Entry index of each run.
    pub indices: Vec<u64>,
}

/// An epoch over a pack in batches (`Iterator<Item = Result<PackBatch>>`).
/// It keeps the pack's file open, so it may outlive the [`Pack`]. A failing
/// batch is returned as `Err` and retried by the next call.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let runs = dir.path().join("runs");
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(30).write_dir(&runs, 4, 1)?;
/// # let path = dir.path().join("runs.a2pack");
/// # a2pack::pack_dir(&runs, &path, a2pack::PackWriterOptions::new(), None)?;
/// let pack = a2pack::Pack::open(&path)?;
/// for batch in pack.iter(&a2pack::PackIterOptions::new().batch_size(3).shuffle(1))? {
///     let batch = batch?;
///     println!("{} runs", batch.indices.len());
/// }
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct PackIter {
    raw: *mut sys::a2pack_pack_iter,
}

unsafe_send!(PackIter);

impl fmt::Debug for PackIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackIter").finish_non_exhaustive()
    }
}

impl Drop for PackIter {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_pack_iter_close(self.raw) }
    }
}

impl Iterator for PackIter {
    type Item = Result<PackBatch>;

    fn next(&mut self) -> Option<Result<PackBatch>> {
        let (mut out, mut idx, mut n) = (std::ptr::null_mut(), std::ptr::null(), 0usize);
        // SAFETY: owned iterator used from one thread (&mut self).
        if let Err(e) = check(unsafe { sys::a2pack_pack_iter_next(self.raw, &mut out, &mut idx, &mut n) }) {
            return Some(Err(e));
        }
        if out.is_null() {
            return None;
        }
        // SAFETY: owned batch; idx is a view of n indices, copied at once.
        Some(Ok(PackBatch { runs: unsafe { RunBatch::from_raw(out) }, indices: unsafe { view(idx, n) }.to_vec() }))
    }
}

/// Compression of pack entries.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let runs = dir.path().join("runs");
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(30).write_dir(&runs, 4, 1)?;
/// # let path = dir.path().join("runs.a2pack");
/// # a2pack::pack_dir(&runs, &path, a2pack::PackWriterOptions::new(), None)?;
/// let zpath = dir.path().join("z.a2pack");
/// let s = a2pack::pack_dir(&runs, &zpath, a2pack::PackWriterOptions::new().compression(a2pack::PackCompression::Zstd).zstd_level(9), None)?;
/// assert_eq!(a2pack::Pack::open(&zpath)?.read(2)?, a2pack::Pack::open(&path)?.read(2)?);
/// assert!(s.stored_bytes <= s.input_bytes);
/// let lpath = dir.path().join("l.a2pack");
/// a2pack::pack_dir(&runs, &lpath, a2pack::PackWriterOptions::new().compression(a2pack::PackCompression::Lz4).lz4_level(9), None)?;
/// assert_eq!(a2pack::Pack::open(&lpath)?.read(2)?, a2pack::Pack::open(&path)?.read(2)?);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackCompression {
    /// Run files stored verbatim.
    None,
    /// One zstd frame per entry (stored when zstd does not shrink it).
    Zstd,
    /// One LZ4 frame per entry (stored when lz4 does not shrink it): larger
    /// than zstd, faster to decode.
    Lz4,
}

/// What a finished pack build did.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let runs = dir.path().join("runs");
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(30).write_dir(&runs, 4, 1)?;
/// # let path = dir.path().join("runs.a2pack");
/// # a2pack::pack_dir(&runs, &path, a2pack::PackWriterOptions::new(), None)?;
/// let s = a2pack::pack_dir(&runs, dir.path().join("b.a2pack"), a2pack::PackWriterOptions::new().align(64), None)?;
/// assert_eq!((s.entries, s.skipped, s.compressed_entries), (4, 0, 0));
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BuildSummary {
    /// Runs in the pack.
    pub entries: u64,
    /// Bad inputs skipped.
    pub skipped: u64,
    /// Run-file bytes of the entries.
    pub input_bytes: u64,
    /// Payload bytes stored (after compression).
    pub stored_bytes: u64,
    /// Entries stored compressed (zstd or lz4).
    pub compressed_entries: u64,
    /// Size of the pack file.
    pub file_bytes: u64,
}

impl BuildSummary {
    fn from_raw(s: &sys::a2pack_pack_build_summary) -> BuildSummary {
        BuildSummary {
            entries: s.entries,
            skipped: s.skipped,
            input_bytes: s.input_bytes,
            stored_bytes: s.stored_bytes,
            compressed_entries: s.compressed_entries,
            file_bytes: s.file_bytes,
        }
    }
}

type BadInputFn = Box<dyn FnMut(&Path, &Error) + Send>;

/// Options of [`PackWriter`] and [`pack_dir`], as a typed builder.
///
/// ```
/// let opts = a2pack::PackWriterOptions::new()
///     .compression(a2pack::PackCompression::Zstd)
///     .skip_bad(true)
///     .on_bad_input(|path, err| eprintln!("skipped {}: {err}", path.display()));
/// ```
#[derive(Default)]
pub struct PackWriterOptions {
    raw: Option<sys::a2pack_pack_writer_options>,
    on_bad_input: Option<BadInputFn>,
}

impl fmt::Debug for PackWriterOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackWriterOptions").field("raw", &self.raw()).finish()
    }
}

impl PackWriterOptions {
    /// The defaults (4096-byte alignment, entry CRCs, no compression).
    pub fn new() -> PackWriterOptions {
        PackWriterOptions::default()
    }

    fn raw(&self) -> sys::a2pack_pack_writer_options {
        self.raw.unwrap_or_else(|| {
            let mut raw = sys::a2pack_pack_writer_options::default();
            // SAFETY: fills the struct.
            unsafe { sys::a2pack_pack_writer_options_init(&mut raw) };
            raw
        })
    }

    fn set(mut self, f: impl FnOnce(&mut sys::a2pack_pack_writer_options)) -> Self {
        let mut raw = self.raw();
        f(&mut raw);
        self.raw = Some(raw);
        self
    }

    /// Payload alignment (power of two, 1..1 MiB).
    pub fn align(self, align: u32) -> Self {
        self.set(|r| r.align = align)
    }

    /// Store each payload's CRC32C (default `true`).
    pub fn entry_crc(self, on: bool) -> Self {
        self.set(|r| r.entry_crc = i32::from(on))
    }

    /// Entry compression.
    pub fn compression(self, c: PackCompression) -> Self {
        self.set(|r| {
            r.compression = match c {
                PackCompression::None => sys::A2PACK_PACK_COMPRESS_NONE,
                PackCompression::Zstd => sys::A2PACK_PACK_COMPRESS_ZSTD,
                PackCompression::Lz4 => sys::A2PACK_PACK_COMPRESS_LZ4,
            }
        })
    }

    /// zstd level (default 3).
    pub fn zstd_level(self, level: i32) -> Self {
        self.set(|r| r.zstd_level = level)
    }

    /// lz4 level (default 0, LZ4's fast mode; negative = faster, 3..=12 =
    /// LZ4 HC).
    pub fn lz4_level(self, level: i32) -> Self {
        self.set(|r| r.lz4_level = level)
    }

    /// Entries to come (writes payloads in place; more fails).
    pub fn expected_count(self, n: u64) -> Self {
        self.set(|r| r.expected_count = n)
    }

    /// Threads of `add_files` / [`pack_dir`] (0 = all cores).
    pub fn workers(self, n: u32) -> Self {
        self.set(|r| r.workers = n)
    }

    /// Skip unreadable or corrupt runs in `add_files` / [`pack_dir`].
    pub fn skip_bad(self, on: bool) -> Self {
        self.set(|r| r.skip_bad = i32::from(on))
    }

    /// Told about each bad input that `skip_bad` skips (a panic in it is
    /// caught at the C boundary and resumed after the call).
    pub fn on_bad_input(mut self, f: impl FnMut(&Path, &Error) + Send + 'static) -> Self {
        self.on_bad_input = Some(Box::new(f));
        self
    }
}

/// The bad-input closure with the panic it may have raised.
struct BadInput {
    f: Option<BadInputFn>,
    panic: Option<Box<dyn std::any::Any + Send>>,
}

impl BadInput {
    /// Options for C with the trampoline pointing at `self` (boxed: stable).
    fn wire(self: &mut Box<Self>, mut raw: sys::a2pack_pack_writer_options) -> sys::a2pack_pack_writer_options {
        if self.f.is_some() {
            raw.on_bad_input = Some(bad_input_trampoline);
            raw.on_bad_input_user = (&mut **self as *mut BadInput).cast();
        }
        raw
    }

    fn resume(&mut self) {
        if let Some(p) = self.panic.take() {
            resume_unwind(p);
        }
    }
}

unsafe extern "C" fn bad_input_trampoline(user: *mut c_void, path: *const c_char, status: i32, message: *const c_char) {
    // SAFETY: `user` is the boxed BadInput wired for this writer or call.
    let state = &mut *user.cast::<BadInput>();
    if state.panic.is_some() {
        return;
    }
    let Some(f) = state.f.as_mut() else { return };
    let text =
        |p: *const c_char| if p.is_null() { String::new() } else { CStr::from_ptr(p).to_string_lossy().into_owned() };
    let path = PathBuf::from(text(path));
    let err = Error::new(Status::from_code(status).unwrap_or(Status::Internal), text(message));
    if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(&path, &err))) {
        state.panic = Some(p);
    }
}

/// Builds a pack. Nothing appears at the path until [`PackWriter::finish`];
/// dropping an unfinished writer abandons it (no file is left).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("two.a2pack");
/// let mut w = a2pack::PackWriter::create(&path, &a2pack::PackWriterOptions::new())?;
/// for seed in 0..2 {
///     let run = a2pack::GenOptions::new().policy(a2pack::Policy::Random).run(seed)?;
///     w.add(&run.encode(a2pack::RunKind::V2)?)?;
/// }
/// assert_eq!(w.finish()?.entries, 2);
/// assert_eq!(a2pack::Pack::open(&path)?.len(), 2);
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct PackWriter {
    raw: *mut sys::a2pack_pack_writer,
    bad_input: Box<BadInput>,
}

unsafe_send!(PackWriter);

impl fmt::Debug for PackWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackWriter").field("count", &self.count()).finish()
    }
}

impl Drop for PackWriter {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_pack_writer_close(self.raw) }
    }
}

impl PackWriter {
    /// Start a pack at `path`.
    pub fn create(path: impl AsRef<Path>, opts: &PackWriterOptions) -> Result<PackWriter> {
        PackWriter::create_owned(path, PackWriterOptions { raw: opts.raw, on_bad_input: None })
    }

    /// Start a pack at `path`, taking the options (and their bad-input closure).
    pub fn create_owned(path: impl AsRef<Path>, opts: PackWriterOptions) -> Result<PackWriter> {
        let c = path_cstr(path.as_ref())?;
        let raw_opts = opts.raw();
        let mut bad_input = Box::new(BadInput { f: opts.on_bad_input, panic: None });
        let raw_opts = bad_input.wire(raw_opts);
        let mut out = std::ptr::null_mut();
        // SAFETY: valid path and options; the boxed closure outlives the writer.
        check(unsafe { sys::a2pack_pack_writer_open(c.as_ptr(), &raw_opts, &mut out) })?;
        Ok(PackWriter { raw: out, bad_input })
    }

    /// Append one run file's bytes (decoded first; invalid bytes fail and
    /// the writer stays usable).
    pub fn add(&mut self, run_bytes: &[u8]) -> Result<()> {
        // SAFETY: owned writer used through &mut.
        check(unsafe { sys::a2pack_pack_writer_add(self.raw, run_bytes.as_ptr(), run_bytes.len()) })
    }

    /// Append a run file read from `path`.
    pub fn add_file(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let c = path_cstr(path.as_ref())?;
        // SAFETY: owned writer; valid path.
        check(unsafe { sys::a2pack_pack_writer_add_file(self.raw, c.as_ptr()) })
    }

    /// Append run files read and checked in parallel, in the given order.
    pub fn add_files<P: AsRef<Path>>(
        &mut self,
        paths: &[P],
        progress: Option<&mut dyn FnMut(u64, u64) -> bool>,
    ) -> Result<()> {
        let c = CPaths::new(paths)?;
        let raw = self.raw;
        let result = with_progress(progress, |cb, user| {
            // SAFETY: owned writer; n valid paths; the callback pair is alive.
            check(unsafe { sys::a2pack_pack_writer_add_files(raw, c.as_ptr(), c.len(), cb, user) })
        });
        self.bad_input.resume();
        result
    }

    /// Entries added so far.
    pub fn count(&self) -> u64 {
        // SAFETY: valid handle.
        unsafe { sys::a2pack_pack_writer_count(self.raw) }
    }

    /// Write the index and footer and move the pack into place.
    pub fn finish(mut self) -> Result<BuildSummary> {
        let mut s = sys::a2pack_pack_build_summary {
            size: std::mem::size_of::<sys::a2pack_pack_build_summary>(),
            ..Default::default()
        };
        // SAFETY: owned writer; size set.
        let result = check(unsafe { sys::a2pack_pack_writer_finish(self.raw, &mut s) });
        self.bad_input.resume();
        result.map(|()| BuildSummary::from_raw(&s))
    }
}

/// Pack every `*.a2run2` under `input_dir` (recursively, in path order)
/// into `output`.
pub fn pack_dir(
    input_dir: impl AsRef<Path>,
    output: impl AsRef<Path>,
    opts: PackWriterOptions,
    progress: Option<&mut dyn FnMut(u64, u64) -> bool>,
) -> Result<BuildSummary> {
    let input = path_cstr(input_dir.as_ref())?;
    let output = path_cstr(output.as_ref())?;
    let raw_opts = opts.raw();
    let mut bad_input = Box::new(BadInput { f: opts.on_bad_input, panic: None });
    let raw_opts = bad_input.wire(raw_opts);
    let mut s = sys::a2pack_pack_build_summary {
        size: std::mem::size_of::<sys::a2pack_pack_build_summary>(),
        ..Default::default()
    };
    let result = with_progress(progress, |cb, user| {
        // SAFETY: valid paths and options; the closures outlive the call.
        check(unsafe { sys::a2pack_pack_dir(input.as_ptr(), output.as_ptr(), &raw_opts, cb, user, &mut s) })
    });
    bad_input.resume();
    result.map(|()| BuildSummary::from_raw(&s))
}

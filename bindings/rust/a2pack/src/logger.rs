//! The sparse-vector data logger and its decoder.

use std::ffi::CStr;
use std::fmt;
use std::path::{Path, PathBuf};

use a2pack_sys as sys;

use crate::error::{check, Error, Result, Status};
use crate::ffi::{path_cstr, text_cstr, unsafe_send, unsafe_sync, view};

/// What `record` does when the writer is behind.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let opts = a2pack::LoggerOptions::new().when_full(a2pack::logger::WhenFull::Block).ring_bytes(1 << 20).frame_bytes(1 << 16);
/// a2pack::DataLogger::open_with(dir.path(), &opts)?.close()?;
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenFull {
    /// Wait for the writer (default).
    Block,
    /// Fail with [`Status::Full`]; nothing of the record is kept.
    ReturnFull,
}

/// Options of [`DataLogger::open_with`], as a typed builder.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let opts = a2pack::LoggerOptions::new().zstd_level(3).flush_interval_ms(0).when_full(a2pack::logger::WhenFull::ReturnFull);
/// let log = a2pack::DataLogger::open_with(dir.path(), &opts)?;
/// log.close()?;
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct LoggerOptions {
    raw: sys::a2pack_logger_options,
}

impl Default for LoggerOptions {
    fn default() -> Self {
        LoggerOptions::new()
    }
}

impl LoggerOptions {
    /// The library's defaults.
    pub fn new() -> LoggerOptions {
        let mut raw = sys::a2pack_logger_options::default();
        // SAFETY: fills the struct.
        unsafe { sys::a2pack_logger_options_init(&mut raw) };
        LoggerOptions { raw }
    }

    /// Memory for frames waiting for the writer.
    pub fn ring_bytes(mut self, n: u64) -> Self {
        self.raw.ring_bytes = n;
        self
    }

    /// Start a new segment before one would pass this size.
    pub fn rotate_bytes(mut self, n: u64) -> Self {
        self.raw.rotate_bytes = n;
        self
    }

    /// zstd level (negative: fast modes).
    pub fn zstd_level(mut self, level: i32) -> Self {
        self.raw.zstd_level = level;
        self
    }

    /// Uncompressed bytes per frame.
    pub fn frame_bytes(mut self, n: u32) -> Self {
        self.raw.frame_bytes = n;
        self
    }

    /// Hand a partly filled frame to the writer after at most this long.
    pub fn flush_interval_ms(mut self, ms: u32) -> Self {
        self.raw.flush_interval_ms = ms;
        self
    }

    /// Behaviour when the queue is full.
    pub fn when_full(mut self, w: WhenFull) -> Self {
        self.raw.when_full = match w {
            WhenFull::Block => sys::A2PACK_LOGGER_BLOCK,
            WhenFull::ReturnFull => sys::A2PACK_LOGGER_RETURN_FULL,
        };
        self
    }

    /// Threads compressing frames (0 = auto).
    pub fn writer_threads(mut self, n: u32) -> Self {
        self.raw.writer_threads = n;
        self
    }

    /// Let zstd Huffman-code the literals.
    pub fn compress_literals(mut self, on: bool) -> Self {
        self.raw.compress_literals = u32::from(on);
        self
    }
}

/// A stream id handed out by [`DataLogger::register_stream`].
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let log = a2pack::DataLogger::open(dir.path())?;
/// let s = log.register_stream(r#"{"measure":"x"}"#, 0.5, 0.25, true)?;
/// log.record(s, 1.0, &[9, 2], &[1.0, -0.5])?;
/// log.close()?;
/// assert_eq!(s, a2pack::StreamId(0));
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u32);

/// Counters of a logger.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let log = a2pack::DataLogger::open(dir.path())?;
/// let s = log.register_stream("{}", 1.0, 1.0, false)?;
/// log.record(s, 0.0, &[1], &[2.0])?;
/// log.flush()?;
/// let stats = log.stats()?;
/// assert_eq!((stats.records, stats.values), (1, 1));
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoggerStats {
    /// Records handed to the kernel.
    pub records: u64,
    /// Their non-zeros.
    pub values: u64,
    /// Encoded bytes before compression.
    pub raw_bytes: u64,
    /// zstd frames written.
    pub frames: u64,
    /// Bytes appended to segments.
    pub file_bytes: u64,
    /// Segments created.
    pub segments: u64,
    /// Records that found the queue full.
    pub full_events: u64,
    /// Frame memory queued now.
    pub queued_bytes: u64,
    /// Its high-water mark.
    pub max_queued_bytes: u64,
    /// Flush barriers completed.
    pub flushes: u64,
}

/// Many records for one [`DataLogger::record_batch`] call: record i is
/// (`stream_ids[i]`, `epochs[i]`, `indices`/`values[offsets[i]..offsets[i+1]]`).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let log = a2pack::DataLogger::open(dir.path())?;
/// let s = log.register_stream("{}", 1.0, 1.0, false)?;
/// let batch = a2pack::logger::RecordBatch { stream_ids: &[s.0, s.0], epochs: &[0.0, 1.0], offsets: &[0, 1, 3], indices: &[4, 1, 2], values: &[1.0, 2.0, 3.0] };
/// log.record_batch(&batch)?;
/// log.close()?;
/// assert_eq!(a2pack::logger::decode(dir.path())?.columns().offsets, &[0, 1, 3]);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RecordBatch<'a> {
    /// Stream of each record.
    pub stream_ids: &'a [u32],
    /// Epoch of each record.
    pub epochs: &'a [f64],
    /// n + 1 non-decreasing offsets.
    pub offsets: &'a [u64],
    /// Non-zero indices of all records.
    pub indices: &'a [u32],
    /// Their values.
    pub values: &'a [f64],
}

/// Records sparse vectors from any number of threads into
/// `<dir>/segments/`. `Send + Sync`: the header lets register, record,
/// flush, stats and finish run from many threads at once. Dropping it
/// closes it (finish, then release); call [`DataLogger::close`] to see the
/// writer's error.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let log = a2pack::DataLogger::open(dir.path())?;
/// let s = log.register_stream(r#"{"entity":"net","measure":"grad"}"#, 1.0, 1e-6, false)?;
/// log.record(s, 0.0, &[1, 5], &[0.5, -2.0])?;
/// log.close()?;
/// let data = a2pack::logger::decode(dir.path())?;
/// assert_eq!(data.columns().indices, &[1, 5]);
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct DataLogger {
    raw: *mut sys::a2pack_logger,
}

unsafe_send!(DataLogger);
unsafe_sync!(DataLogger);

impl Drop for DataLogger {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once; &mut self: no other call races.
        unsafe { sys::a2pack_logger_close(self.raw) };
    }
}

impl fmt::Debug for DataLogger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataLogger").field("stats", &self.stats().ok()).finish()
    }
}

impl DataLogger {
    /// Open a logger on `dir` with the default options.
    pub fn open(dir: impl AsRef<Path>) -> Result<DataLogger> {
        DataLogger::open_with(dir, &LoggerOptions::new())
    }

    /// Open a logger on `dir` (created when missing).
    pub fn open_with(dir: impl AsRef<Path>, opts: &LoggerOptions) -> Result<DataLogger> {
        let c = path_cstr(dir.as_ref())?;
        let mut out = std::ptr::null_mut();
        // SAFETY: valid path and options.
        check(unsafe { sys::a2pack_logger_open(c.as_ptr(), &opts.raw, &mut out) })?;
        Ok(DataLogger { raw: out })
    }

    /// Register a stream (labels: a JSON object; `sort`: sort each record's
    /// pairs instead of refusing unsorted indices).
    pub fn register_stream(
        &self,
        labels_json: &str,
        epoch_scale: f64,
        value_scale: f64,
        sort: bool,
    ) -> Result<StreamId> {
        let labels = text_cstr("labels_json", labels_json)?;
        let flags = if sort { sys::A2PACK_LOGGER_SORT } else { 0 };
        let mut id = 0u32;
        // SAFETY: thread-safe call; valid text.
        check(unsafe {
            sys::a2pack_logger_register_stream(self.raw, labels.as_ptr(), epoch_scale, value_scale, flags, &mut id)
        })?;
        Ok(StreamId(id))
    }

    /// Record one sparse vector (`indices` and `values` of equal length).
    pub fn record(&self, stream: StreamId, epoch: f64, indices: &[u32], values: &[f64]) -> Result<()> {
        if indices.len() != values.len() {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("record: {} indices but {} values", indices.len(), values.len()),
            ));
        }
        // SAFETY: thread-safe call; arrays of n read during the call.
        check(unsafe {
            sys::a2pack_logger_record(self.raw, stream.0, epoch, indices.as_ptr(), values.as_ptr(), indices.len())
        })
    }

    /// Record many records in order. On an error, [`Error::accepted`] tells
    /// how many were accepted before the failing one.
    pub fn record_batch(&self, batch: &RecordBatch<'_>) -> Result<()> {
        let n = batch.stream_ids.len();
        let bad = |what: &str| Error::new(Status::InvalidArgument, format!("record_batch: {what}")).with_accepted(0);
        if batch.epochs.len() != n || batch.offsets.len() != n + 1 {
            return Err(bad("stream_ids, epochs and offsets (n + 1) disagree in length"));
        }
        if batch.indices.len() != batch.values.len() {
            return Err(bad("indices and values differ in length"));
        }
        if batch.offsets.iter().any(|&o| o as usize > batch.indices.len()) {
            return Err(bad("an offset reaches past the indices"));
        }
        let mut done = 0usize;
        // SAFETY: all arrays have the checked lengths; thread-safe call.
        let status = unsafe {
            sys::a2pack_logger_record_batch(
                self.raw,
                n,
                batch.stream_ids.as_ptr(),
                batch.epochs.as_ptr(),
                batch.offsets.as_ptr(),
                batch.indices.as_ptr(),
                batch.values.as_ptr(),
                &mut done,
            )
        };
        check(status).map_err(|e| e.with_accepted(done))
    }

    /// Make everything recorded before this call durable.
    pub fn flush(&self) -> Result<()> {
        // SAFETY: thread-safe call.
        check(unsafe { sys::a2pack_logger_flush(self.raw) })
    }

    /// Flush, stop the writer and release the folder; later records fail
    /// with [`Status::Closed`].
    pub fn finish(&self) -> Result<()> {
        // SAFETY: thread-safe call.
        check(unsafe { sys::a2pack_logger_finish(self.raw) })
    }

    /// Finish and release, returning the writer's error if it met one.
    pub fn close(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: owned handle, released once (Drop is skipped).
        check(unsafe { sys::a2pack_logger_close(raw) })
    }

    /// Counters (also after finish).
    pub fn stats(&self) -> Result<LoggerStats> {
        let mut s =
            sys::a2pack_logger_stats { size: std::mem::size_of::<sys::a2pack_logger_stats>(), ..Default::default() };
        // SAFETY: thread-safe call; size set.
        check(unsafe { sys::a2pack_logger_stats_get(self.raw, &mut s) })?;
        Ok(LoggerStats {
            records: s.records,
            values: s.values,
            raw_bytes: s.raw_bytes,
            frames: s.frames,
            file_bytes: s.file_bytes,
            segments: s.segments,
            full_events: s.full_events,
            queued_bytes: s.queued_bytes,
            max_queued_bytes: s.max_queued_bytes,
            flushes: s.flushes,
        })
    }
}

/// Options of [`decode_with`].
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let log = a2pack::DataLogger::open(dir.path())?;
/// let s = log.register_stream(r#"{"measure":"x"}"#, 0.5, 0.25, true)?;
/// log.record(s, 1.0, &[9, 2], &[1.0, -0.5])?;
/// log.close()?;
/// let data = a2pack::logger::decode_with(dir.path(), &a2pack::logger::DecodeOptions::new().workers(1).strict(true))?;
/// assert_eq!(data.summary().records, 1);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct DecodeOptions {
    raw: sys::a2pack_logger_decode_options,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions::new()
    }
}

impl DecodeOptions {
    /// Defaults: all cores, damage reported as problems.
    pub fn new() -> DecodeOptions {
        let mut raw = sys::a2pack_logger_decode_options::default();
        // SAFETY: fills the struct.
        unsafe { sys::a2pack_logger_decode_options_init(&mut raw) };
        DecodeOptions { raw }
    }

    /// Threads (0 = all cores).
    pub fn workers(mut self, n: u32) -> Self {
        self.raw.workers = n;
        self
    }

    /// Fail on the first problem instead of skipping it.
    pub fn strict(mut self, on: bool) -> Self {
        self.raw.strict = u32::from(on);
        self
    }
}

/// Decode a logger folder with the default options.
pub fn decode(dir: impl AsRef<Path>) -> Result<LoggerData> {
    decode_with(dir, &DecodeOptions::new())
}

/// Decode a logger folder into columns.
pub fn decode_with(dir: impl AsRef<Path>, opts: &DecodeOptions) -> Result<LoggerData> {
    let c = path_cstr(dir.as_ref())?;
    let mut out = std::ptr::null_mut();
    // SAFETY: valid path and options.
    check(unsafe { sys::a2pack_logger_decode(c.as_ptr(), &opts.raw, &mut out) })?;
    Ok(LoggerData { raw: out })
}

/// The records of a decoded folder, borrowed from [`LoggerData`].
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let log = a2pack::DataLogger::open(dir.path())?;
/// let s = log.register_stream(r#"{"measure":"x"}"#, 0.5, 0.25, true)?;
/// log.record(s, 1.0, &[9, 2], &[1.0, -0.5])?;
/// log.close()?;
/// let data = a2pack::logger::decode(dir.path())?;
/// let c = data.columns();
/// assert_eq!((c.indices, c.values, c.epochs), (&[2, 9][..], &[-0.5, 1.0][..], &[1.0][..])); // sorted by the stream
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct LoggerColumns<'a> {
    /// Stream of each record.
    pub stream_ids: &'a [u32],
    /// Epoch of each record.
    pub epochs: &'a [f64],
    /// n_records + 1 offsets into indices/values.
    pub offsets: &'a [u64],
    /// Non-zero indices.
    pub indices: &'a [u32],
    /// Their values.
    pub values: &'a [f64],
}

/// Totals of a decode.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let log = a2pack::DataLogger::open(dir.path())?;
/// let s = log.register_stream(r#"{"measure":"x"}"#, 0.5, 0.25, true)?;
/// log.record(s, 1.0, &[9, 2], &[1.0, -0.5])?;
/// log.close()?;
/// let sum = a2pack::logger::decode(dir.path())?.summary();
/// assert_eq!((sum.records, sum.values, sum.streams, sum.problems), (1, 2, 1, 0));
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoggerSummary {
    /// Segment files read.
    pub segments: u64,
    /// Good frames.
    pub frames: u64,
    /// Frames or byte ranges skipped.
    pub bad_frames: u64,
    /// Bytes of all segments.
    pub file_bytes: u64,
    /// Decompressed bytes of the good frames.
    pub raw_bytes: u64,
    /// Records.
    pub records: u64,
    /// Non-zeros.
    pub values: u64,
    /// Stream sidecars read.
    pub streams: u64,
    /// Problems reported.
    pub problems: u64,
}

/// A stream of a decoded folder.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let log = a2pack::DataLogger::open(dir.path())?;
/// let s = log.register_stream(r#"{"measure":"x"}"#, 0.5, 0.25, true)?;
/// log.record(s, 1.0, &[9, 2], &[1.0, -0.5])?;
/// log.close()?;
/// let streams = a2pack::logger::decode(dir.path())?.streams()?;
/// assert_eq!((streams[0].epoch_scale, streams[0].sort, streams[0].labels_json.as_str()), (0.5, true, r#"{"measure":"x"}"#));
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct StreamInfo {
    /// Its id.
    pub id: StreamId,
    /// Whether it sorts records.
    pub sort: bool,
    /// Epoch scale.
    pub epoch_scale: f64,
    /// Value scale.
    pub value_scale: f64,
    /// Labels, compact JSON.
    pub labels_json: String,
}

/// Damage a decode skipped.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let log = a2pack::DataLogger::open(dir.path())?;
/// let s = log.register_stream(r#"{"measure":"x"}"#, 0.5, 0.25, true)?;
/// log.record(s, 1.0, &[9, 2], &[1.0, -0.5])?;
/// log.close()?;
/// let seg = std::fs::read_dir(dir.path().join("segments")).unwrap().next().unwrap().unwrap().path();
/// let mut bytes = std::fs::read(&seg).unwrap();
/// let n = bytes.len();
/// bytes[n - 2] ^= 0xFF;
/// std::fs::write(&seg, &bytes).unwrap();
/// let problems = a2pack::logger::decode(dir.path())?.problems()?;
/// assert!(!problems.is_empty() && problems[0].path == seg);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What kind of damage.
    pub status: Status,
    /// Byte offset in the file.
    pub offset: u64,
    /// The file.
    pub path: PathBuf,
    /// What was wrong.
    pub message: String,
}

/// A decoded logger folder.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let log = a2pack::DataLogger::open(dir.path())?;
/// let s = log.register_stream(r#"{"measure":"x"}"#, 0.5, 0.25, true)?;
/// log.record(s, 1.0, &[9, 2], &[1.0, -0.5])?;
/// log.close()?;
/// let data = a2pack::logger::decode(dir.path())?;
/// assert_eq!(data.columns().stream_ids, &[0]);
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct LoggerData {
    raw: *mut sys::a2pack_logger_data,
}

unsafe_send!(LoggerData);

impl Drop for LoggerData {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_logger_data_close(self.raw) }
    }
}

impl fmt::Debug for LoggerData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoggerData").field("summary", &self.summary()).finish()
    }
}

fn cstr(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: NUL-terminated view, copied at once.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl LoggerData {
    /// The records as columns.
    pub fn columns(&self) -> LoggerColumns<'_> {
        let mut c = sys::a2pack_logger_columns {
            size: std::mem::size_of::<sys::a2pack_logger_columns>(),
            ..Default::default()
        };
        // SAFETY: size set; cannot fail on valid data.
        let status = unsafe { sys::a2pack_logger_data_columns(self.raw, &mut c) };
        assert_eq!(status, 0, "a2pack_logger_data_columns failed on valid data");
        // SAFETY: views valid while the data lives, which `'_` borrows.
        unsafe {
            LoggerColumns {
                stream_ids: view(c.stream_ids, c.n_records),
                epochs: view(c.epochs, c.n_records),
                offsets: view(c.offsets, c.n_records + 1),
                indices: view(c.indices, c.n_values),
                values: view(c.values, c.n_values),
            }
        }
    }

    /// The records as an Arrow record batch (one copy).
    pub fn to_arrow(&self) -> Result<crate::arrow::RecordBatch> {
        // SAFETY: valid data.
        crate::arrow::export(|s, a| unsafe { sys::a2pack_logger_data_export_arrow(self.raw, s, a) })
    }

    /// Totals.
    pub fn summary(&self) -> LoggerSummary {
        let mut s = sys::a2pack_logger_summary {
            size: std::mem::size_of::<sys::a2pack_logger_summary>(),
            ..Default::default()
        };
        // SAFETY: size set; cannot fail on valid data.
        let status = unsafe { sys::a2pack_logger_data_summary(self.raw, &mut s) };
        assert_eq!(status, 0, "a2pack_logger_data_summary failed on valid data");
        LoggerSummary {
            segments: s.segments,
            frames: s.frames,
            bad_frames: s.bad_frames,
            file_bytes: s.file_bytes,
            raw_bytes: s.raw_bytes,
            records: s.records,
            values: s.values,
            streams: s.streams,
            problems: s.problems,
        }
    }

    /// The streams, ascending by id.
    pub fn streams(&self) -> Result<Vec<StreamInfo>> {
        (0..self.summary().streams as usize)
            .map(|i| {
                let mut s = sys::a2pack_logger_stream_info {
                    size: std::mem::size_of::<sys::a2pack_logger_stream_info>(),
                    ..Default::default()
                };
                // SAFETY: size set; the labels view is copied at once.
                check(unsafe { sys::a2pack_logger_data_stream(self.raw, i, &mut s) })?;
                Ok(StreamInfo {
                    id: StreamId(s.stream_id),
                    sort: s.flags & sys::A2PACK_LOGGER_SORT != 0,
                    epoch_scale: s.epoch_scale,
                    value_scale: s.value_scale,
                    labels_json: cstr(s.labels_json),
                })
            })
            .collect()
    }

    /// What the decode skipped.
    pub fn problems(&self) -> Result<Vec<Problem>> {
        (0..self.summary().problems as usize)
            .map(|i| {
                let mut p = sys::a2pack_logger_problem {
                    size: std::mem::size_of::<sys::a2pack_logger_problem>(),
                    ..Default::default()
                };
                // SAFETY: size set; views copied at once.
                check(unsafe { sys::a2pack_logger_data_problem(self.raw, i, &mut p) })?;
                Ok(Problem {
                    status: Status::from_code(p.status).unwrap_or(Status::Internal),
                    offset: p.offset,
                    path: PathBuf::from(cstr(p.path)),
                    message: cstr(p.message),
                })
            })
            .collect()
    }
}

//! Bagz / Säckli record files, format-compatible with the `bagz` and
//! `sackli` Python packages.

use std::ffi::CStr;
use std::fmt;
use std::path::{Path, PathBuf};

use a2pack_sys as sys;

use crate::error::{check, Error, Result, Status};
use crate::ffi::{path_cstr, unsafe_send, unsafe_sync, view, CPaths};

/// Record compression.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("plain-named.bagz");
/// let opts = a2pack::bag::WriterOptions::new().compression(a2pack::bag::Compression::None);
/// let mut w = a2pack::bag::Writer::create(&path, &opts)?;
/// w.write(b"stored")?;
/// w.commit()?;
/// let r = a2pack::bag::Reader::open_with(&path, &a2pack::bag::ReaderOptions::new().compression(a2pack::bag::Compression::None))?;
/// assert_eq!(r.get(0)?, b"stored");
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// By extension: `.bagz` is zstd, anything else none.
    Auto,
    /// Stored.
    None,
    /// One zstd frame per non-empty record.
    Zstd,
}

impl Compression {
    fn raw(self) -> sys::a2pack_bag_compression {
        match self {
            Compression::Auto => sys::A2PACK_BAG_COMPRESSION_AUTO,
            Compression::None => sys::A2PACK_BAG_COMPRESSION_NONE,
            Compression::Zstd => sys::A2PACK_BAG_COMPRESSION_ZSTD,
        }
    }
}

/// Where the limits (record end offsets) live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitsPlacement {
    /// Appended to the records file.
    Tail,
    /// In `limits.<name>` beside it.
    Separate,
}

impl LimitsPlacement {
    fn raw(self) -> sys::a2pack_bag_limits_placement {
        match self {
            LimitsPlacement::Tail => sys::A2PACK_BAG_LIMITS_TAIL,
            LimitsPlacement::Separate => sys::A2PACK_BAG_LIMITS_SEPARATE,
        }
    }
}

/// How the reader holds the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitsStorage {
    /// Read from the file on each lookup.
    OnDisk,
    /// Loaded (and fully checked) at open.
    InMemory,
}

/// Access-pattern hint of the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessPattern {
    /// No hint.
    System,
    /// Random access.
    Random,
    /// Sequential access.
    Sequential,
}

/// How the reader reads (and caches) bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CachePolicy {
    /// mmap; the page cache keeps what was read.
    System,
    /// pread, then drop the pages.
    DropAfterRead,
    /// O_DIRECT aligned reads where the filesystem allows.
    DirectIo,
}

/// How shards number their records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharding {
    /// Shards one after another.
    Concatenated,
    /// Round-robin: index g is shard g % S, record g / S.
    Interleaved,
}

/// Options of [`Writer`], as a typed builder.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let opts = a2pack::bag::WriterOptions::new().zstd_level(5).workers(1).durable(false).direct_io(false);
/// let mut w = a2pack::bag::Writer::create(dir.path().join("o.bagz"), &opts)?;
/// w.write(b"x")?;
/// w.flush()?;
/// w.commit()?;
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct WriterOptions {
    raw: sys::a2pack_bag_writer_options,
    dictionary: Option<Vec<u8>>,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions::new()
    }
}

impl WriterOptions {
    /// Defaults: compression by extension, limits at the tail, durable.
    pub fn new() -> WriterOptions {
        let mut raw = sys::a2pack_bag_writer_options::default();
        // SAFETY: fills the struct.
        unsafe { sys::a2pack_bag_writer_options_init(&mut raw) };
        WriterOptions { raw, dictionary: None }
    }

    /// Record compression.
    pub fn compression(mut self, c: Compression) -> Self {
        self.raw.compression = c.raw();
        self
    }

    /// zstd level (0 = zstd's default).
    pub fn zstd_level(mut self, level: i32) -> Self {
        self.raw.zstd_level = level;
        self
    }

    /// A zstd dictionary.
    pub fn zstd_dictionary(mut self, dict: &[u8]) -> Self {
        self.dictionary = Some(dict.to_vec());
        self
    }

    /// Where the limits go.
    pub fn limits_placement(mut self, p: LimitsPlacement) -> Self {
        self.raw.limits_placement = p.raw();
        self
    }

    /// Threads compressing a batch (0 = all cores).
    pub fn workers(mut self, n: u32) -> Self {
        self.raw.workers = n;
        self
    }

    /// fsync before the commit's rename (default `true`).
    pub fn durable(mut self, on: bool) -> Self {
        self.raw.durable = i32::from(on);
        self
    }

    /// Write whole blocks with O_DIRECT where allowed (default `true`);
    /// without `durable`, blocks also go through the page cache at the same
    /// time, until the kernel would start throttling writers.
    pub fn direct_io(mut self, on: bool) -> Self {
        self.raw.direct_io = i32::from(on);
        self
    }

    fn to_raw(&self) -> sys::a2pack_bag_writer_options {
        let mut raw = self.raw;
        if let Some(d) = &self.dictionary {
            raw.zstd_dictionary = d.as_ptr();
            raw.zstd_dictionary_len = d.len();
        }
        raw
    }
}

/// Writes a record file. Nothing appears at the path until
/// [`Writer::commit`]; dropping an uncommitted writer abandons the file.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("words.bagz");
/// let mut w = a2pack::bag::Writer::create(&path, &a2pack::bag::WriterOptions::new())?;
/// w.write(b"hello")?;
/// w.write_all([&b"big"[..], b"world"])?;
/// w.commit()?;
/// let r = a2pack::bag::Reader::open(&path)?;
/// assert_eq!(r.len(), 3);
/// assert_eq!(r.get(2)?, b"world");
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct Writer {
    raw: *mut sys::a2pack_bag_writer,
}

unsafe_send!(Writer);

impl Drop for Writer {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_bag_writer_close(self.raw) }
    }
}

impl fmt::Debug for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer").field("count", &self.count()).finish()
    }
}

impl Writer {
    /// Start writing `path`.
    pub fn create(path: impl AsRef<Path>, opts: &WriterOptions) -> Result<Writer> {
        let c = path_cstr(path.as_ref())?;
        let raw_opts = opts.to_raw();
        let mut out = std::ptr::null_mut();
        // SAFETY: valid path and options (the dictionary is copied at open).
        check(unsafe { sys::a2pack_bag_writer_open(c.as_ptr(), &raw_opts, &mut out) })?;
        Ok(Writer { raw: out })
    }

    /// Append one record.
    pub fn write(&mut self, record: &[u8]) -> Result<()> {
        // SAFETY: owned writer used through &mut.
        check(unsafe { sys::a2pack_bag_writer_write(self.raw, record.as_ptr(), record.len()) })
    }

    /// Append records given as one buffer and n + 1 offsets into it
    /// (compressed in parallel; one call).
    pub fn write_batch(&mut self, data: &[u8], offsets: &[u64]) -> Result<()> {
        let n = offsets.len().saturating_sub(1);
        if let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) {
            if last < first || (last - first) as usize > data.len() {
                return Err(Error::new(Status::InvalidArgument, "write_batch: offsets reach past the data"));
            }
        }
        // SAFETY: offsets stay within data (checked; the library checks order).
        check(unsafe { sys::a2pack_bag_writer_write_batch(self.raw, data.as_ptr(), offsets.as_ptr(), n) })
    }

    /// Append many records in one batch call.
    pub fn write_all<I, R>(&mut self, records: I) -> Result<()>
    where
        I: IntoIterator<Item = R>,
        R: AsRef<[u8]>,
    {
        let (mut data, mut offsets) = (Vec::new(), vec![0u64]);
        for r in records {
            data.extend_from_slice(r.as_ref());
            offsets.push(data.len() as u64);
        }
        self.write_batch(&data, &offsets)
    }

    /// Hand buffered bytes to the operating system.
    pub fn flush(&mut self) -> Result<()> {
        // SAFETY: owned writer.
        check(unsafe { sys::a2pack_bag_writer_flush(self.raw) })
    }

    /// Finish the file and move it into place.
    pub fn commit(&mut self) -> Result<()> {
        // SAFETY: owned writer.
        check(unsafe { sys::a2pack_bag_writer_commit(self.raw) })
    }

    /// Records written so far.
    pub fn count(&self) -> u64 {
        // SAFETY: valid handle.
        unsafe { sys::a2pack_bag_writer_count(self.raw) }
    }
}

/// Options of [`Reader`], as a typed builder.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("r.bagz");
/// # let mut w = a2pack::bag::Writer::create(&path, &Default::default())?;
/// # w.write_all([&b"zero"[..], b"one", b"two"])?;
/// # w.commit()?;
/// let opts = a2pack::bag::ReaderOptions::new()
///     .limits_storage(a2pack::bag::LimitsStorage::InMemory)
///     .access_pattern(a2pack::bag::AccessPattern::Random)
///     .cache_policy(a2pack::bag::CachePolicy::DropAfterRead)
///     .sharding(a2pack::bag::Sharding::Concatenated)
///     .max_parallelism(2);
/// assert_eq!(a2pack::bag::Reader::open_with(&path, &opts)?.get(1)?, b"one");
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ReaderOptions {
    raw: sys::a2pack_bag_reader_options,
    dictionary: Option<Vec<u8>>,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions::new()
    }
}

impl ReaderOptions {
    /// Defaults: compression by extension, limits on disk, mmap.
    pub fn new() -> ReaderOptions {
        let mut raw = sys::a2pack_bag_reader_options::default();
        // SAFETY: fills the struct.
        unsafe { sys::a2pack_bag_reader_options_init(&mut raw) };
        ReaderOptions { raw, dictionary: None }
    }

    /// Record compression (default by extension, per shard).
    pub fn compression(mut self, c: Compression) -> Self {
        self.raw.compression = c.raw();
        self
    }

    /// A zstd dictionary.
    pub fn zstd_dictionary(mut self, dict: &[u8]) -> Self {
        self.dictionary = Some(dict.to_vec());
        self
    }

    /// Where the limits are.
    pub fn limits_placement(mut self, p: LimitsPlacement) -> Self {
        self.raw.limits_placement = p.raw();
        self
    }

    /// How the limits are held.
    pub fn limits_storage(mut self, s: LimitsStorage) -> Self {
        self.raw.limits_storage = match s {
            LimitsStorage::OnDisk => sys::A2PACK_BAG_LIMITS_ON_DISK,
            LimitsStorage::InMemory => sys::A2PACK_BAG_LIMITS_IN_MEMORY,
        };
        self
    }

    /// Access-pattern hint.
    pub fn access_pattern(mut self, a: AccessPattern) -> Self {
        self.raw.access_pattern = match a {
            AccessPattern::System => sys::A2PACK_BAG_ACCESS_SYSTEM,
            AccessPattern::Random => sys::A2PACK_BAG_ACCESS_RANDOM,
            AccessPattern::Sequential => sys::A2PACK_BAG_ACCESS_SEQUENTIAL,
        };
        self
    }

    /// Cache policy.
    pub fn cache_policy(mut self, c: CachePolicy) -> Self {
        self.raw.cache_policy = match c {
            CachePolicy::System => sys::A2PACK_BAG_CACHE_SYSTEM,
            CachePolicy::DropAfterRead => sys::A2PACK_BAG_CACHE_DROP_AFTER_READ,
            CachePolicy::DirectIo => sys::A2PACK_BAG_CACHE_DIRECT_IO,
        };
        self
    }

    /// How shards number their records.
    pub fn sharding(mut self, s: Sharding) -> Self {
        self.raw.sharding = match s {
            Sharding::Concatenated => sys::A2PACK_BAG_SHARDING_CONCATENATED,
            Sharding::Interleaved => sys::A2PACK_BAG_SHARDING_INTERLEAVED,
        };
        self
    }

    /// Threads per batch read (0 = all cores).
    pub fn max_parallelism(mut self, n: u32) -> Self {
        self.raw.max_parallelism = n;
        self
    }

    fn to_raw(&self) -> sys::a2pack_bag_reader_options {
        let mut raw = self.raw;
        if let Some(d) = &self.dictionary {
            raw.zstd_dictionary = d.as_ptr();
            raw.zstd_dictionary_len = d.len();
        }
        raw
    }
}

/// One shard of a [`Reader`].
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("r.bagz");
/// # let mut w = a2pack::bag::Writer::create(&path, &Default::default())?;
/// # w.write_all([&b"zero"[..], b"one", b"two"])?;
/// # w.commit()?;
/// let info = a2pack::bag::Reader::open(&path)?.shard_info(0)?;
/// assert_eq!((info.records, info.compressed, info.path == path), (3, true, true));
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardInfo {
    /// Its path.
    pub path: PathBuf,
    /// Its records.
    pub records: u64,
    /// Whether its records are decompressed.
    pub compressed: bool,
    /// How its bytes are read ("mmap", "pread+dontneed", ...).
    pub mode: String,
}

/// Reads a record file or a sharded set of them. Thread-safe
/// (`Send + Sync`), as the header documents.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # for shard in 0..2 {
/// #     let path = dir.path().join(format!("data-{shard:05}-of-00002.bagz"));
/// #     let mut w = a2pack::bag::Writer::create(&path, &Default::default())?;
/// #     w.write_all((0..5).map(|i| format!("{shard}:{i}")))?;
/// #     w.commit()?;
/// # }
/// let r = a2pack::bag::Reader::open(dir.path().join("data@*.bagz"))?;
/// assert_eq!((r.len(), r.shard_count()), (10, 2));
/// let batch = r.read(&[3, 1, 4], 0)?;
/// assert_eq!(batch.get(0), Some(&b"0:3"[..]));
/// for record in batch.iter() {
///     println!("{} bytes", record.len());
/// }
/// for record in r.iter() {
///     let record: Vec<u8> = record?;
/// }
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct Reader {
    raw: *mut sys::a2pack_bag_reader,
}

unsafe_send!(Reader);
unsafe_sync!(Reader);

impl Drop for Reader {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_bag_reader_close(self.raw) }
    }
}

impl fmt::Debug for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader").field("len", &self.len()).field("shards", &self.shard_count()).finish()
    }
}

impl Reader {
    /// Open a file spec (`f.bagz`, `name@N.bagz`, `name@*.bagz`, or a
    /// comma-separated list) with the default options.
    pub fn open(spec: impl AsRef<Path>) -> Result<Reader> {
        Reader::open_with(spec, &ReaderOptions::new())
    }

    /// Open a file spec with options.
    pub fn open_with(spec: impl AsRef<Path>, opts: &ReaderOptions) -> Result<Reader> {
        let c = path_cstr(spec.as_ref())?;
        let raw_opts = opts.to_raw();
        let mut out = std::ptr::null_mut();
        // SAFETY: valid spec and options.
        check(unsafe { sys::a2pack_bag_reader_open(c.as_ptr(), &raw_opts, &mut out) })?;
        Ok(Reader { raw: out })
    }

    /// Open the given files as shards, in order (no spec expansion).
    pub fn open_paths<P: AsRef<Path>>(paths: &[P], opts: &ReaderOptions) -> Result<Reader> {
        let c = CPaths::new(paths)?;
        let raw_opts = opts.to_raw();
        let mut out = std::ptr::null_mut();
        // SAFETY: n valid paths and options.
        check(unsafe { sys::a2pack_bag_reader_open_paths(c.as_ptr(), c.len(), &raw_opts, &mut out) })?;
        Ok(Reader { raw: out })
    }

    /// Records over all shards.
    pub fn len(&self) -> u64 {
        // SAFETY: valid handle.
        unsafe { sys::a2pack_bag_reader_count(self.raw) }
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of all records sections (compressed for .bagz).
    pub fn stored_bytes(&self) -> u64 {
        // SAFETY: valid handle.
        unsafe { sys::a2pack_bag_reader_stored_bytes(self.raw) }
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        // SAFETY: valid handle.
        unsafe { sys::a2pack_bag_reader_shard_count(self.raw) }
    }

    /// Shard `i`.
    pub fn shard_info(&self, i: usize) -> Result<ShardInfo> {
        let (mut path, mut records, mut compressed, mut mode) = (std::ptr::null(), 0u64, 0i32, std::ptr::null());
        // SAFETY: valid handle; the strings are views copied at once.
        check(unsafe {
            sys::a2pack_bag_reader_shard_info(self.raw, i, &mut path, &mut records, &mut compressed, &mut mode)
        })?;
        // SAFETY: NUL-terminated views valid while the reader lives.
        let text = |p: *const std::ffi::c_char| {
            if p.is_null() {
                String::new()
            } else {
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        };
        Ok(ShardInfo { path: PathBuf::from(text(path)), records, compressed: compressed != 0, mode: text(mode) })
    }

    /// Read records by index (any order, repeats allowed) into one batch,
    /// on up to `workers` threads (0 = the reader's max_parallelism).
    pub fn read(&self, indices: &[u64], workers: u32) -> Result<Batch> {
        let mut out = std::ptr::null_mut();
        // SAFETY: n indices; out receives an owned batch.
        check(unsafe { sys::a2pack_bag_reader_read(self.raw, indices.as_ptr(), indices.len(), workers, &mut out) })?;
        Ok(Batch { raw: out })
    }

    /// Read records `[start, start + count)` into one batch.
    pub fn read_range(&self, start: u64, count: u64, workers: u32) -> Result<Batch> {
        let mut out = std::ptr::null_mut();
        // SAFETY: out receives an owned batch.
        check(unsafe { sys::a2pack_bag_reader_read_range(self.raw, start, count, workers, &mut out) })?;
        Ok(Batch { raw: out })
    }

    /// Record `i`, copied.
    pub fn get(&self, i: u64) -> Result<Vec<u8>> {
        Ok(self.read_range(i, 1, 1)?.get(0).expect("a one-record batch").to_vec())
    }

    /// Every record in order, read ahead in batches of 1024.
    pub fn iter(&self) -> RecordIter<'_> {
        self.iter_with(1024)
    }

    /// Every record in order, read ahead `chunk` records at a time.
    pub fn iter_with(&self, chunk: u64) -> RecordIter<'_> {
        RecordIter { reader: self, next: 0, end: self.len(), chunk: chunk.max(1), batch: None, pos: 0 }
    }

    /// Where records lie (shard, begin, end) without reading them.
    pub fn spans(&self, indices: &[u64]) -> Result<Vec<(u32, u64, u64)>> {
        let n = indices.len();
        let (mut s, mut b, mut e) = (vec![0u32; n], vec![0u64; n], vec![0u64; n]);
        // SAFETY: caller's arrays of n.
        check(unsafe {
            sys::a2pack_bag_reader_spans(self.raw, indices.as_ptr(), n, s.as_mut_ptr(), b.as_mut_ptr(), e.as_mut_ptr())
        })?;
        Ok((0..n).map(|k| (s[k], b[k], e[k])).collect())
    }

    /// Where records `[start, start + count)` lie (shard, begin, end).
    pub fn spans_range(&self, start: u64, count: u64) -> Result<Vec<(u32, u64, u64)>> {
        let n = usize::try_from(count).map_err(|_| Error::new(Status::OutOfRange, "spans_range: count too large"))?;
        let (mut s, mut b, mut e) = (vec![0u32; n], vec![0u64; n], vec![0u64; n]);
        // SAFETY: caller's arrays of count.
        check(unsafe {
            sys::a2pack_bag_reader_spans_range(self.raw, start, count, s.as_mut_ptr(), b.as_mut_ptr(), e.as_mut_ptr())
        })?;
        Ok((0..n).map(|k| (s[k], b[k], e[k])).collect())
    }

    /// Decoded size of records `indices`, without decoding them.
    pub fn sizes(&self, indices: &[u64], workers: u32) -> Result<Vec<u64>> {
        let mut out = vec![0u64; indices.len()];
        // SAFETY: out holds n sizes.
        check(unsafe {
            sys::a2pack_bag_reader_sizes(self.raw, indices.as_ptr(), indices.len(), workers, out.as_mut_ptr())
        })?;
        Ok(out)
    }

    /// Warnings found at open, one per line ("" when none).
    pub fn notes(&self) -> String {
        // SAFETY: a NUL-terminated view owned by the reader, copied at once.
        let p = unsafe { sys::a2pack_bag_reader_notes(self.raw) };
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: as above.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    }

    /// The mapping of shard `i` (mmap'ed, uncompressed shards only),
    /// borrowed from the reader.
    pub fn shard_map(&self, i: usize) -> Result<&[u8]> {
        let (mut base, mut size) = (std::ptr::null(), 0u64);
        // SAFETY: valid handle; the view lives as long as the reader.
        check(unsafe { sys::a2pack_bag_reader_shard_map(self.raw, i, &mut base, &mut size) })?;
        // SAFETY: as above.
        Ok(unsafe { view(base, size as usize) })
    }

    /// Step 1 of a two-step read into caller memory: locate and size
    /// records `indices`. See [`Pending`].
    pub fn prepare(&self, indices: &[u64], workers: u32) -> Result<Pending> {
        let (mut out, mut sizes) = (std::ptr::null_mut(), std::ptr::null());
        // SAFETY: n indices; out receives an owned pending read.
        check(unsafe {
            sys::a2pack_bag_reader_prepare(self.raw, indices.as_ptr(), indices.len(), workers, &mut out, &mut sizes)
        })?;
        Ok(Pending { raw: out, sizes, n: indices.len() })
    }

    /// A reverse index of every record (positions are global indices).
    pub fn index(&self, workers: u32) -> Result<MultiIndex> {
        MultiIndex::build(self, None, workers)
    }
}

/// Records read in one buffer; records borrow the batch.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("r.bagz");
/// # let mut w = a2pack::bag::Writer::create(&path, &Default::default())?;
/// # w.write_all([&b"zero"[..], b"one", b"two"])?;
/// # w.commit()?;
/// let batch = a2pack::bag::Reader::open(&path)?.read_range(1, 2, 1)?;
/// let (data, offsets) = batch.raw_parts();
/// assert_eq!((data, offsets), (&b"onetwo"[..], &[0, 3, 6][..]));
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct Batch {
    raw: *mut sys::a2pack_bag_batch,
}

unsafe_send!(Batch);

impl Drop for Batch {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_bag_batch_close(self.raw) }
    }
}

impl fmt::Debug for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch").field("len", &self.len()).finish()
    }
}

impl Batch {
    /// The buffer and its n + 1 offsets.
    pub fn raw_parts(&self) -> (&[u8], &[u64]) {
        let (mut data, mut offsets, mut n) = (std::ptr::null(), std::ptr::null(), 0usize);
        // SAFETY: views valid while the batch lives.
        unsafe {
            sys::a2pack_bag_batch_view(self.raw, &mut data, &mut offsets, &mut n);
            let offsets = view(offsets, n + 1);
            let total = offsets.last().copied().unwrap_or(0) as usize;
            (view(data, total), offsets)
        }
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.raw_parts().1.len().saturating_sub(1)
    }

    /// The batch as an Arrow record batch (one `record` column, zero-copy):
    /// the export takes the batch.
    pub fn into_arrow(self) -> Result<crate::arrow::RecordBatch> {
        // SAFETY: on success the export owns the batch handle (forgotten
        // below); on failure it is still ours and dropped normally.
        let rb = crate::arrow::export(|s, a| unsafe { sys::a2pack_bag_batch_export_arrow(self.raw, s, a) })?;
        std::mem::forget(self);
        Ok(rb)
    }

    /// Whether the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Record `k` of the batch.
    pub fn get(&self, k: usize) -> Option<&[u8]> {
        let (data, offsets) = self.raw_parts();
        (k + 1 < offsets.len()).then(|| &data[offsets[k] as usize..offsets[k + 1] as usize])
    }

    /// The records in batch order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let (data, offsets) = self.raw_parts();
        offsets.windows(2).map(move |w| &data[w[0] as usize..w[1] as usize])
    }
}

/// Iterator over a reader's records, reading ahead in batches.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("r.bagz");
/// # let mut w = a2pack::bag::Writer::create(&path, &Default::default())?;
/// # w.write_all([&b"zero"[..], b"one", b"two"])?;
/// # w.commit()?;
/// let r = a2pack::bag::Reader::open(&path)?;
/// let all: Vec<Vec<u8>> = r.iter_with(2).collect::<Result<_, _>>()?;
/// assert_eq!(all, [b"zero".to_vec(), b"one".to_vec(), b"two".to_vec()]);
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct RecordIter<'a> {
    reader: &'a Reader,
    next: u64,
    end: u64,
    chunk: u64,
    batch: Option<Batch>,
    pos: usize,
}

impl fmt::Debug for RecordIter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordIter").field("next", &self.next).field("end", &self.end).finish()
    }
}

impl Iterator for RecordIter<'_> {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Result<Vec<u8>>> {
        loop {
            if let Some(b) = &self.batch {
                if let Some(r) = b.get(self.pos) {
                    self.pos += 1;
                    return Some(Ok(r.to_vec()));
                }
                self.batch = None;
            }
            if self.next >= self.end {
                return None;
            }
            let count = self.chunk.min(self.end - self.next);
            match self.reader.read_range(self.next, count, 0) {
                Ok(b) => {
                    self.next += count;
                    self.batch = Some(b);
                    self.pos = 0;
                }
                Err(e) => {
                    self.next = self.end;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// A two-step read into caller memory: [`Pending::sizes`], then
/// [`Pending::fill`] each destination. Keeps what it needs of the reader.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("p.bag");
/// # let mut w = a2pack::bag::Writer::create(&path, &Default::default())?;
/// # w.write_all([&b"ab"[..], b"cde"])?; w.commit()?;
/// let r = a2pack::bag::Reader::open(&path)?;
/// let mut p = r.prepare(&[1, 0], 0)?;
/// let mut bufs: Vec<Vec<u8>> = p.sizes().iter().map(|&n| vec![0; n as usize]).collect();
/// p.fill(&mut bufs)?;
/// assert_eq!(bufs, vec![b"cde".to_vec(), b"ab".to_vec()]);
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct Pending {
    raw: *mut sys::a2pack_bag_pending,
    sizes: *const u64,
    n: usize,
}

unsafe_send!(Pending);

impl Drop for Pending {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_bag_pending_close(self.raw) }
    }
}

impl fmt::Debug for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pending").field("sizes", &self.sizes()).finish()
    }
}

impl Pending {
    /// Decoded size of each record.
    pub fn sizes(&self) -> &[u64] {
        // SAFETY: n sizes valid while the pending read lives.
        unsafe { view(self.sizes, self.n) }
    }

    /// Copy or decompress record k into `dests[k]` (exactly `sizes()[k]` bytes each).
    pub fn fill<D: AsMut<[u8]>>(&mut self, dests: &mut [D]) -> Result<()> {
        if dests.len() != self.n {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("fill: {} destinations for {} records", dests.len(), self.n),
            ));
        }
        let sizes = self.sizes().to_vec();
        let mut ptrs = Vec::with_capacity(self.n);
        for (k, d) in dests.iter_mut().enumerate() {
            let d = d.as_mut();
            if d.len() as u64 != sizes[k] {
                return Err(Error::new(
                    Status::InvalidArgument,
                    format!("fill: destination {k} holds {} bytes, record is {}", d.len(), sizes[k]),
                ));
            }
            ptrs.push(d.as_mut_ptr());
        }
        // SAFETY: each destination holds exactly sizes[k] bytes.
        check(unsafe { sys::a2pack_bag_pending_fill(self.raw, ptrs.as_ptr()) })
    }
}

/// Positions of every distinct record: bagz's `MultiIndex` (all positions
/// of a record). Thread-safe lookups (`Send + Sync`).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("i.bag");
/// # let mut w = a2pack::bag::Writer::create(&path, &Default::default())?;
/// # w.write_all([&b"a"[..], b"b", b"a"])?; w.commit()?;
/// let r = a2pack::bag::Reader::open(&path)?;
/// let idx = r.index(0)?;
/// assert_eq!(idx.get(b"a"), &[0, 2]);
/// assert_eq!(idx.unique(), 2);
/// let first = a2pack::bag::Index::new(idx);
/// assert_eq!(first.get(b"a"), Some(0));
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct MultiIndex {
    raw: *mut sys::a2pack_bag_index,
}

unsafe_send!(MultiIndex);
unsafe_sync!(MultiIndex);

impl Drop for MultiIndex {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_bag_index_close(self.raw) }
    }
}

impl fmt::Debug for MultiIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiIndex").field("unique", &self.unique()).finish()
    }
}

impl MultiIndex {
    /// Index `reader[indices[k]]` reporting positions k, or (`None`) every
    /// record reporting global indices.
    pub fn build(reader: &Reader, indices: Option<&[u64]>, workers: u32) -> Result<MultiIndex> {
        let (ptr, n) = indices.map_or((std::ptr::null(), 0), |i| (i.as_ptr(), i.len() as u64));
        let mut out = std::ptr::null_mut();
        // SAFETY: n indices or NULL; out receives an owned index.
        check(unsafe { sys::a2pack_bag_index_build(reader.raw, ptr, n, workers, &mut out) })?;
        Ok(MultiIndex { raw: out })
    }

    /// Positions (ascending) of records equal to `key` (empty when absent).
    pub fn get(&self, key: &[u8]) -> &[u64] {
        let (mut pos, mut count) = (std::ptr::null(), 0u64);
        // SAFETY: valid index; a view valid while it lives.
        let status = unsafe { sys::a2pack_bag_index_find(self.raw, key.as_ptr(), key.len(), &mut pos, &mut count) };
        if status != 0 {
            return &[];
        }
        // SAFETY: as above.
        unsafe { view(pos, count as usize) }
    }

    /// Number of distinct records.
    pub fn unique(&self) -> u64 {
        // SAFETY: valid handle.
        unsafe { sys::a2pack_bag_index_unique(self.raw) }
    }
}

/// bagz's `Index`: the first position of each distinct record.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let path = dir.path().join("r.bagz");
/// # let mut w = a2pack::bag::Writer::create(&path, &Default::default())?;
/// # w.write_all([&b"zero"[..], b"one", b"two"])?;
/// # w.commit()?;
/// let r = a2pack::bag::Reader::open(&path)?;
/// let idx = a2pack::bag::Index::build(&r, None, 1)?;
/// assert_eq!((idx.get(b"two"), idx.get(b"three"), idx.unique()), (Some(2), None, 3));
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug)]
pub struct Index(MultiIndex);

impl Index {
    /// The first-position view of a [`MultiIndex`].
    pub fn new(multi: MultiIndex) -> Index {
        Index(multi)
    }

    /// Build over a reader (see [`MultiIndex::build`]).
    pub fn build(reader: &Reader, indices: Option<&[u64]>, workers: u32) -> Result<Index> {
        MultiIndex::build(reader, indices, workers).map(Index)
    }

    /// First position of `key`.
    pub fn get(&self, key: &[u8]) -> Option<u64> {
        self.0.get(key).first().copied()
    }

    /// Number of distinct records.
    pub fn unique(&self) -> u64 {
        self.0.unique()
    }
}

//! Step datasets: a folder of `steps.npy` (32-byte rows), `metadata.db`
//! (SQLite, one row per run) and `manifest.json`.

use std::fmt;
use std::path::{Path, PathBuf};

use a2pack_sys as sys;

use crate::error::{check, Error, Result, Status};
use crate::ffi::{path_cstr, take_owned, text_cstr, unsafe_send, unsafe_sync, view, Progress};

/// One dataset row, exactly the 32-byte numpy dtype
/// `[('board','<u8'),('move','u1'),('ev_legal','u1'),('ev_values','<f4',(4,)),('run_id','<u4'),('step_index','<u2')]`
/// (little-endian, packed). Read fields through the accessors
/// (`row.run_id()`), which return copies: a packed struct's fields cannot
/// be borrowed, so `format!("{}", row.run_id)` is refused by the compiler
/// (E0793) while `format!("{}", row.run_id())` works. The public fields
/// are there to build rows.
///
/// ```
/// assert_eq!(std::mem::size_of::<a2pack::StepRow>(), 32);
/// let row = a2pack::StepRow { run_id: 7, ev_values: [1.0, 0.0, 0.5, 0.0], ..Default::default() };
/// assert_eq!(format!("run {} step {} values {:?}", row.run_id(), row.step_index(), row.ev_values()),
///            "run 7 step 0 values [1.0, 0.0, 0.5, 0.0]");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[repr(C, packed)]
pub struct StepRow {
    /// Board before the step.
    pub board: u64,
    /// Chosen move 0..3.
    pub mv: u8,
    /// Bit i = move i legal.
    pub ev_legal: u8,
    /// The chosen move 1.0, illegal 0.0, others their normalised values.
    pub ev_values: [f32; 4],
    /// Run id.
    pub run_id: u32,
    /// Step index within the run.
    pub step_index: u16,
}

const _: () = assert!(std::mem::size_of::<StepRow>() == sys::A2PACK_DATASET_ROW_BYTES as usize);

impl StepRow {
    /// Board before the step.
    pub fn board(&self) -> u64 {
        self.board
    }

    /// Chosen move 0..3.
    pub fn mv(&self) -> u8 {
        self.mv
    }

    /// Bit i = move i legal.
    pub fn ev_legal(&self) -> u8 {
        self.ev_legal
    }

    /// The chosen move 1.0, illegal 0.0, others their normalised values.
    pub fn ev_values(&self) -> [f32; 4] {
        self.ev_values
    }

    /// Run id.
    pub fn run_id(&self) -> u32 {
        self.run_id
    }

    /// Step index within the run.
    pub fn step_index(&self) -> u16 {
        self.step_index
    }
}

/// Row positions (`usize`) as the C API's `int64_t` indices: the same bits
/// on the 64-bit targets the library supports (a position past
/// `i64::MAX` reads as negative, which the library rejects as out of range).
pub(crate) fn positions_ptr(idx: &[usize]) -> *const i64 {
    const _: () = assert!(std::mem::size_of::<usize>() == std::mem::size_of::<i64>());
    idx.as_ptr().cast()
}

/// The C API's non-negative `int64_t` positions as `usize` (in place).
fn into_positions(v: Vec<i64>) -> Vec<usize> {
    v.into_iter().map(|i| i as usize).collect()
}

/// Options of [`build`] and [`append`], as a typed builder (the progress
/// closure is a separate argument).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).max_steps(20).write_dir(dir.path().join("runs"), 3, 1)?;
/// let opts = a2pack::BuildOptions::new().workers(1).allow_missing_branches(true);
/// let mut seen = 0;
/// let mut progress = |done: u64, _total: u64| { seen = done; true };
/// let r = a2pack::dataset::build(dir.path().join("runs"), dir.path().join("ds"), &opts, Some(&mut progress))?;
/// assert_eq!((r.runs_added, seen), (3, 3));
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct BuildOptions {
    raw: sys::a2pack_dataset_build_options,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions::new()
    }
}

impl BuildOptions {
    /// Defaults: all cores, branches required, no overwrite.
    pub fn new() -> BuildOptions {
        let mut raw = sys::a2pack_dataset_build_options::default();
        // SAFETY: fills the struct.
        unsafe { sys::a2pack_dataset_build_options_init(&mut raw) };
        BuildOptions { raw }
    }

    /// Decode threads (0 = all cores).
    pub fn workers(mut self, n: u32) -> Self {
        self.raw.workers = n;
        self
    }

    /// Accept runs without branch values (only the chosen move is legal).
    pub fn allow_missing_branches(mut self, on: bool) -> Self {
        self.raw.allow_missing_branches = i32::from(on);
        self
    }

    /// Replace an existing output folder ([`build`] only).
    pub fn overwrite(mut self, on: bool) -> Self {
        self.raw.overwrite = i32::from(on);
        self
    }

    /// [`append`] only: write a new steps.npy (the old rows copied, then
    /// renamed into place) instead of extending it in place. Costs a copy of
    /// the whole file; for folders that programs other than a2pack read
    /// while appends run.
    pub fn copy_steps(mut self, on: bool) -> Self {
        self.raw.copy_steps = i32::from(on);
        self
    }

    /// [`build`]: write the sharded layout, shards of whole runs of at most
    /// `rows` rows (0, the default: one steps.npy); read it larger than RAM
    /// with [`ShardStream`](crate::ShardStream). [`append`] to a sharded
    /// dataset: the new shards' size (0: the dataset's); it writes new
    /// shards only.
    pub fn shard_rows(mut self, rows: u64) -> Self {
        self.raw.shard_rows = rows;
        self
    }

    /// Write runs whose content digest matches a run the dataset holds or
    /// another run of the same input (docs/dataset.md, "Run digests"); each
    /// copy is recorded as one. Off (the default): such a build or append
    /// fails with [`Status::InvalidArgument`](crate::Status) saying how many
    /// and which, and changes nothing.
    pub fn allow_duplicates(mut self, on: bool) -> Self {
        self.raw.allow_duplicates = i32::from(on);
        self
    }
}

/// What a build or append did.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).max_steps(20).write_dir(dir.path().join("runs"), 3, 1)?;
/// let r = a2pack::dataset::build(dir.path().join("runs"), dir.path().join("ds"), &Default::default(), None)?;
/// assert_eq!((r.runs_added, r.total_runs, r.rows_added), (3, 3, r.total_rows));
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BuildResult {
    /// Runs added by the call.
    pub runs_added: u64,
    /// Rows added by the call.
    pub rows_added: u64,
    /// Runs of the dataset after the call.
    pub total_runs: u64,
    /// Rows of the dataset after the call.
    pub total_rows: u64,
    /// [`append`]: steps.npy was rewritten as a new file rather than
    /// extended in place ([`BuildOptions::copy_steps`], a header of another
    /// length, or another hard link to the file).
    pub steps_copied: bool,
    /// Runs written that repeat another run
    /// ([`BuildOptions::allow_duplicates`]).
    pub runs_duplicated: u64,
    /// [`append`]: existing runs that had no content digest (a dataset
    /// written before a2pack recorded them) and got one first.
    pub digests_recorded: u64,
}

type BuildFn = unsafe extern "C" fn(
    *const std::ffi::c_char,
    *const std::ffi::c_char,
    *const sys::a2pack_dataset_build_options,
    *mut sys::a2pack_dataset_build_result,
) -> sys::a2pack_status;

fn run_build(
    f: BuildFn,
    a: &Path,
    b: &Path,
    opts: &BuildOptions,
    progress: Option<&mut dyn FnMut(u64, u64) -> bool>,
) -> Result<BuildResult> {
    let (a, b) = (path_cstr(a)?, path_cstr(b)?);
    let mut state = Progress::new(progress);
    let mut raw = opts.raw;
    let (cb, user) = state.raw();
    raw.progress = cb;
    raw.progress_user = user;
    let mut r = sys::a2pack_dataset_build_result {
        size: std::mem::size_of::<sys::a2pack_dataset_build_result>(),
        ..Default::default()
    };
    // SAFETY: valid paths and options; the progress state outlives the call.
    let result = check(unsafe { f(a.as_ptr(), b.as_ptr(), &raw, &mut r) });
    state.finish(result.map(|()| BuildResult {
        runs_added: r.runs_added,
        rows_added: r.rows_added,
        total_runs: r.total_runs,
        total_rows: r.total_rows,
        steps_copied: r.steps_copied != 0,
        runs_duplicated: r.runs_duplicated,
        digests_recorded: r.digests_recorded,
    }))
}

/// Build a dataset in `out_dir` from a folder of run files or a packfile.
/// `progress(runs done, total)` returns `false` to stop.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).max_steps(20).write_dir(dir.path().join("runs"), 3, 1)?;
/// let r = a2pack::dataset::build(dir.path().join("runs"), dir.path().join("ds"), &a2pack::BuildOptions::new(), None)?;
/// assert_eq!(r.total_runs, 3);
/// # Ok::<(), a2pack::Error>(())
/// ```
pub fn build(
    input: impl AsRef<Path>,
    out_dir: impl AsRef<Path>,
    opts: &BuildOptions,
    progress: Option<&mut dyn FnMut(u64, u64) -> bool>,
) -> Result<BuildResult> {
    run_build(sys::a2pack_dataset_build, input.as_ref(), out_dir.as_ref(), opts, progress)
}

/// Append the runs of `input` to the dataset in `dataset_dir`, atomically.
/// steps.npy is extended in place: the append writes the new rows, the
/// file's header and the new runs, whatever the dataset's size
/// (docs/dataset.md). Runs the dataset already holds are refused unless
/// [`BuildOptions::allow_duplicates`].
pub fn append(
    dataset_dir: impl AsRef<Path>,
    input: impl AsRef<Path>,
    opts: &BuildOptions,
    progress: Option<&mut dyn FnMut(u64, u64) -> bool>,
) -> Result<BuildResult> {
    run_build(sys::a2pack_dataset_append, dataset_dir.as_ref(), input.as_ref(), opts, progress)
}

/// Check a dataset completely (with `repair`, first bring an interrupted
/// append back to the committed state). Returns the JSON report; a problem
/// is an `Err` whose message lists them.
pub fn verify(dataset_dir: impl AsRef<Path>, repair: bool, workers: u32) -> Result<String> {
    let c = path_cstr(dataset_dir.as_ref())?;
    let mut report = std::ptr::null_mut();
    let flags = if repair { sys::A2PACK_DATASET_VERIFY_REPAIR } else { 0 };
    // SAFETY: valid path; report receives an owned string.
    let status = unsafe { sys::a2pack_dataset_verify(c.as_ptr(), flags, workers, &mut report) };
    let err = (status != 0).then(|| Error::last(status));
    // SAFETY: NULL or an owned NUL-terminated string.
    let text = unsafe { owned_string(report) };
    match err {
        Some(e) => Err(e),
        None => Ok(text),
    }
}

/// # Safety
/// `p` is NULL or an owned NUL-terminated string from the library.
unsafe fn owned_string(p: *mut std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    let s = std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned();
    sys::a2pack_free(p.cast());
    s
}

/// Options of [`Dataset::open_with`].
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).max_steps(20).write_dir(dir.path().join("runs"), 3, 1)?;
/// # a2pack::dataset::build(dir.path().join("runs"), dir.path().join("ds"), &Default::default(), None)?;
/// let opts = a2pack::OpenOptions::new().mmap(true).verify_crc(true).workers(1);
/// let ds = a2pack::Dataset::open_with(dir.path().join("ds"), &opts)?;
/// assert!(ds.info().mapped);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct OpenOptions {
    raw: sys::a2pack_dataset_open_options,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// Defaults: rows read into RAM, CRC checked, huge pages.
    pub fn new() -> OpenOptions {
        let mut raw = sys::a2pack_dataset_open_options::default();
        // SAFETY: fills the struct.
        unsafe { sys::a2pack_dataset_open_options_init(&mut raw) };
        OpenOptions { raw }
    }

    /// Map steps.npy instead of reading it.
    pub fn mmap(mut self, on: bool) -> Self {
        self.raw.mmap = i32::from(on);
        self
    }

    /// Check the rows against the manifest's CRC32C.
    pub fn verify_crc(mut self, on: bool) -> Self {
        self.raw.verify_crc = i32::from(on);
        self
    }

    /// Back RAM rows with transparent huge pages.
    pub fn huge_pages(mut self, on: bool) -> Self {
        self.raw.huge_pages = i32::from(on);
        self
    }

    /// Threads for loading and checking (0 = all cores).
    pub fn workers(mut self, n: u32) -> Self {
        self.raw.workers = n;
        self
    }

    /// Accept files a dataset does not hold.
    pub fn allow_extra_files(mut self, on: bool) -> Self {
        self.raw.allow_extra_files = i32::from(on);
        self
    }
}

/// Facts about an open dataset.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).max_steps(20).write_dir(dir.path().join("runs"), 3, 1)?;
/// # a2pack::dataset::build(dir.path().join("runs"), dir.path().join("ds"), &Default::default(), None)?;
/// let info = a2pack::Dataset::open(dir.path().join("ds"))?.info();
/// assert!(info.has_manifest && info.runs == 3 && info.next_run_id == 3 && info.uncommitted_rows == 0);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatasetInfo {
    /// Committed rows.
    pub rows: u64,
    /// Committed runs.
    pub runs: u64,
    /// The id the next appended run gets.
    pub next_run_id: u64,
    /// Rows are a mapping of steps.npy.
    pub mapped: bool,
    /// The kernel accepted the huge-page hint.
    pub huge_pages: bool,
    /// Written by a2pack (false for the upstream tool's datasets).
    pub has_manifest: bool,
    /// CRC32C from the manifest (0 without one).
    pub steps_crc32c: u32,
    /// Rows past the committed ones (an interrupted append), ignored.
    pub uncommitted_rows: u64,
}

/// A value bound to a `?` of an SQL filter.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).max_steps(20).write_dir(dir.path().join("runs"), 3, 1)?;
/// # a2pack::dataset::build(dir.path().join("runs"), dir.path().join("ds"), &Default::default(), None)?;
/// use a2pack::SqlParam;
/// let ds = a2pack::Dataset::open(dir.path().join("ds"))?;
/// let ids = ds.select_runs(Some("id >= ? AND engine IS NOT ?"), &[SqlParam::Integer(1), SqlParam::Text("x")])?;
/// assert_eq!(ids, vec![1, 2]);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SqlParam<'a> {
    /// NULL.
    Null,
    /// An integer.
    Integer(i64),
    /// A real.
    Real(f64),
    /// UTF-8 text.
    Text(&'a str),
}

fn raw_params(params: &[SqlParam<'_>]) -> Vec<sys::a2pack_sql_param> {
    params
        .iter()
        .map(|p| {
            let mut r = sys::a2pack_sql_param { text: std::ptr::null(), ..Default::default() };
            match *p {
                SqlParam::Null => r.type_ = sys::A2PACK_SQL_NULL,
                SqlParam::Integer(i) => (r.type_, r.integer) = (sys::A2PACK_SQL_INTEGER, i),
                SqlParam::Real(x) => (r.type_, r.real) = (sys::A2PACK_SQL_REAL, x),
                SqlParam::Text(t) => (r.type_, r.text, r.text_len) = (sys::A2PACK_SQL_TEXT, t.as_ptr().cast(), t.len()),
            }
            r
        })
        .collect()
}

fn where_cstr(w: Option<&str>) -> Result<Option<std::ffi::CString>> {
    w.map(|w| text_cstr("the SQL filter", w)).transpose()
}

/// The C struct over `out`'s slices, each checked to hold n rows' values
/// (exactly, or at least when `exact` is false).
pub(crate) fn raw_columns(
    call: &str,
    out: &mut ColumnsMut<'_>,
    n: usize,
    exact: bool,
) -> Result<sys::a2pack_dataset_columns> {
    let ptr = |what: &str, len: usize, p: *mut u8, want: usize| -> Result<()> {
        if p.is_null() || len == want || (!exact && len > want) {
            Ok(())
        } else {
            Err(Error::new(Status::InvalidArgument, format!("{call}: {what} holds {len} values, {want} needed")))
        }
    };
    fn raw<T>(s: &mut Option<&mut [T]>) -> (*mut T, usize) {
        s.as_deref_mut().map_or((std::ptr::null_mut(), 0), |s| (s.as_mut_ptr(), s.len()))
    }
    let (e, b, m, l, lm, v, r, si) = (
        raw(&mut out.exponents),
        raw(&mut out.boards),
        raw(&mut out.moves),
        raw(&mut out.legal),
        raw(&mut out.legal_mask),
        raw(&mut out.ev_values),
        raw(&mut out.run_ids),
        raw(&mut out.step_indices),
    );
    ptr("exponents", e.1, e.0, n * 16)?;
    ptr("boards", b.1, b.0.cast(), n)?;
    ptr("moves", m.1, m.0, n)?;
    ptr("legal", l.1, l.0, n * 4)?;
    ptr("legal_mask", lm.1, lm.0, n)?;
    ptr("ev_values", v.1, v.0.cast(), n * 4)?;
    ptr("run_ids", r.1, r.0.cast(), n)?;
    ptr("step_indices", si.1, si.0.cast(), n)?;
    Ok(sys::a2pack_dataset_columns {
        size: std::mem::size_of::<sys::a2pack_dataset_columns>(),
        exponents: e.0,
        boards: b.0,
        moves: m.0,
        legal: l.0,
        legal_mask: lm.0,
        ev_values: v.0,
        run_ids: r.0,
        step_indices: si.0,
    })
}

/// Column destinations of [`Dataset::gather_columns`]; `None` members are
/// skipped. Each slice holds n entries per row (16 for exponents, 4 for
/// legal and values, 1 otherwise).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).max_steps(20).write_dir(dir.path().join("runs"), 3, 1)?;
/// # a2pack::dataset::build(dir.path().join("runs"), dir.path().join("ds"), &Default::default(), None)?;
/// let ds = a2pack::Dataset::open(dir.path().join("ds"))?;
/// let (mut moves, mut values) = (vec![0u8; 2], vec![0f32; 8]);
/// ds.gather_columns(&[1, 0], &mut a2pack::ColumnsMut { moves: Some(&mut moves), ev_values: Some(&mut values), ..Default::default() }, 1)?;
/// assert_eq!(values[4 + moves[1] as usize], 1.0); // the chosen move's value
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct ColumnsMut<'a> {
    /// n × 16 tile exponents, cell 0 first.
    pub exponents: Option<&'a mut [u8]>,
    /// n boards.
    pub boards: Option<&'a mut [u64]>,
    /// n chosen moves.
    pub moves: Option<&'a mut [u8]>,
    /// n × 4: 1 where the move is legal.
    pub legal: Option<&'a mut [u8]>,
    /// n ev_legal bitmasks.
    pub legal_mask: Option<&'a mut [u8]>,
    /// n × 4 values.
    pub ev_values: Option<&'a mut [f32]>,
    /// n run ids.
    pub run_ids: Option<&'a mut [u32]>,
    /// n step indices.
    pub step_indices: Option<&'a mut [u16]>,
}

/// An open step dataset: read-only and thread-safe (`Send + Sync`), as the
/// header documents.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).max_steps(20).write_dir(dir.path().join("runs"), 3, 1)?;
/// # a2pack::dataset::build(dir.path().join("runs"), dir.path().join("ds"), &a2pack::BuildOptions::new(), None)?;
/// let ds = a2pack::Dataset::open(dir.path().join("ds"))?;
/// let rows = ds.gather_vec(&[0, 2, 1], 0)?;
/// assert_eq!(rows[1], ds.rows()[2]);
/// let train_and_val = ds.split(None, &[], 0.2, 7, None, &[])?;
/// assert_eq!(train_and_val.0.len() + train_and_val.1.len(), ds.rows().len());
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct Dataset {
    raw: *mut sys::a2pack_dataset,
    dir: PathBuf,
}

unsafe_send!(Dataset);
unsafe_sync!(Dataset);

impl Drop for Dataset {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_dataset_close(self.raw) }
    }
}

impl fmt::Debug for Dataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dataset").field("dir", &self.dir).field("info", &self.info()).finish()
    }
}

impl Dataset {
    /// Open a dataset with the default options.
    pub fn open(dir: impl AsRef<Path>) -> Result<Dataset> {
        Dataset::open_with(dir, &OpenOptions::new())
    }

    /// Open a dataset and load its committed rows.
    pub fn open_with(dir: impl AsRef<Path>, opts: &OpenOptions) -> Result<Dataset> {
        let c = path_cstr(dir.as_ref())?;
        let mut out = std::ptr::null_mut();
        // SAFETY: valid path and options.
        check(unsafe { sys::a2pack_dataset_open(c.as_ptr(), &opts.raw, &mut out) })?;
        Ok(Dataset { raw: out, dir: dir.as_ref().to_path_buf() })
    }

    /// The raw handle, for calls through `a2pack-sys` (still owned by `self`).
    pub fn as_ptr(&self) -> *const sys::a2pack_dataset {
        self.raw
    }

    fn raw_info(&self) -> sys::a2pack_dataset_info {
        let mut i =
            sys::a2pack_dataset_info { size: std::mem::size_of::<sys::a2pack_dataset_info>(), ..Default::default() };
        // SAFETY: size set; cannot fail on an open dataset.
        let status = unsafe { sys::a2pack_dataset_get_info(self.raw, &mut i) };
        assert_eq!(status, 0, "a2pack_dataset_get_info failed on an open dataset");
        i
    }

    /// Rows, runs and how they are held.
    pub fn info(&self) -> DatasetInfo {
        let i = self.raw_info();
        DatasetInfo {
            rows: i.rows,
            runs: i.runs,
            next_run_id: i.next_run_id,
            mapped: i.mapped != 0,
            huge_pages: i.huge_pages != 0,
            has_manifest: i.has_manifest != 0,
            steps_crc32c: i.steps_crc32c,
            uncommitted_rows: i.uncommitted_rows,
        }
    }

    /// Every committed row, borrowed from the dataset.
    pub fn rows(&self) -> &[StepRow] {
        let i = self.raw_info();
        // SAFETY: rows × 32 bytes valid while the dataset lives; StepRow is
        // the packed 32-byte row (alignment 1).
        unsafe { view(i.data.cast::<StepRow>(), i.rows as usize) }
    }

    /// Copy rows `idx` into `out` (same length), in index order, on up to
    /// `workers` threads (0 = all cores). An index out of range fails before
    /// anything is written.
    pub fn gather(&self, idx: &[usize], out: &mut [StepRow], workers: u32) -> Result<()> {
        if out.len() != idx.len() {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("gather: {} indices but room for {} rows", idx.len(), out.len()),
            ));
        }
        // SAFETY: out holds idx.len() rows.
        check(unsafe {
            sys::a2pack_dataset_gather(self.raw, positions_ptr(idx), idx.len(), out.as_mut_ptr().cast(), workers)
        })
    }

    /// Gather rows `idx` into a new vector.
    pub fn gather_vec(&self, idx: &[usize], workers: u32) -> Result<Vec<StepRow>> {
        let mut out = vec![StepRow::default(); idx.len()];
        self.gather(idx, &mut out, workers)?;
        Ok(out)
    }

    /// Gather rows `idx` straight into training arrays.
    pub fn gather_columns(&self, idx: &[usize], out: &mut ColumnsMut<'_>, workers: u32) -> Result<()> {
        let n = idx.len();
        let raw = raw_columns("gather_columns", out, n, true)?;
        // SAFETY: every non-NULL destination has the checked length.
        check(unsafe { sys::a2pack_dataset_gather_columns(self.raw, positions_ptr(idx), n, &raw, workers) })
    }

    fn select_fn(
        &self,
        f: unsafe extern "C" fn(
            *const sys::a2pack_dataset,
            *const std::ffi::c_char,
            *const sys::a2pack_sql_param,
            usize,
            *mut *mut i64,
            *mut usize,
        ) -> sys::a2pack_status,
        where_: Option<&str>,
        params: &[SqlParam<'_>],
    ) -> Result<Vec<i64>> {
        let w = where_cstr(where_)?;
        let p = raw_params(params);
        let (mut out, mut n) = (std::ptr::null_mut(), 0usize);
        // SAFETY: valid filter and parameters; out receives an owned array.
        check(unsafe {
            f(self.raw, w.as_ref().map_or(std::ptr::null(), |w| w.as_ptr()), p.as_ptr(), p.len(), &mut out, &mut n)
        })?;
        // SAFETY: owned array of n values.
        Ok(unsafe { take_owned(out, n) })
    }

    /// Row positions (ascending) of the runs matching an SQL expression
    /// over metadata.db's `runs` columns (`None` = every run), `?` bound to
    /// `params`.
    pub fn select(&self, where_: Option<&str>, params: &[SqlParam<'_>]) -> Result<Vec<usize>> {
        self.select_fn(sys::a2pack_dataset_select, where_, params).map(into_positions)
    }

    /// Ids (ascending) of the runs matching the filter.
    pub fn select_runs(&self, where_: Option<&str>, params: &[SqlParam<'_>]) -> Result<Vec<u64>> {
        let ids = self.select_fn(sys::a2pack_dataset_select_runs, where_, params)?;
        Ok(ids.into_iter().map(|i| i as u64).collect())
    }

    /// Run-disjoint (train, validation) row positions of the runs matching
    /// `where_`: the runs matching `val_where`, or each with probability
    /// `val_fraction` by a hash of (seed, run id).
    pub fn split(
        &self,
        where_: Option<&str>,
        params: &[SqlParam<'_>],
        val_fraction: f64,
        seed: u64,
        val_where: Option<&str>,
        val_params: &[SqlParam<'_>],
    ) -> Result<(Vec<usize>, Vec<usize>)> {
        let (w, vw) = (where_cstr(where_)?, where_cstr(val_where)?);
        let (p, vp) = (raw_params(params), raw_params(val_params));
        let (mut tr, mut ntr, mut va, mut nva) = (std::ptr::null_mut(), 0usize, std::ptr::null_mut(), 0usize);
        // SAFETY: valid filters and parameters; outputs are owned arrays.
        check(unsafe {
            sys::a2pack_dataset_split(
                self.raw,
                w.as_ref().map_or(std::ptr::null(), |w| w.as_ptr()),
                p.as_ptr(),
                p.len(),
                val_fraction,
                seed,
                vw.as_ref().map_or(std::ptr::null(), |w| w.as_ptr()),
                vp.as_ptr(),
                vp.len(),
                &mut tr,
                &mut ntr,
                &mut va,
                &mut nva,
            )
        })?;
        // SAFETY: owned arrays of the given lengths.
        Ok(unsafe { (into_positions(take_owned(tr, ntr)), into_positions(take_owned(va, nva))) })
    }

    /// Rows `idx` as an Arrow record batch (one copy).
    pub fn to_arrow(&self, idx: &[usize], workers: u32) -> Result<crate::arrow::RecordBatch> {
        // SAFETY: n indices, checked by the library.
        crate::arrow::export(|s, a| unsafe {
            sys::a2pack_dataset_export_arrow(self.raw, positions_ptr(idx), idx.len(), workers, s, a)
        })
    }

    /// Every row, or rows `idx`, as an Arrow stream of `chunk_rows`-row
    /// batches (0 = 65536). The stream holds the rows.
    pub fn arrow_stream(&self, idx: Option<&[usize]>, chunk_rows: usize, workers: u32) -> Result<crate::arrow::Stream> {
        let (p, n) = idx.map_or((std::ptr::null(), 0), |i| (positions_ptr(i), i.len()));
        // SAFETY: n indices or NULL (copied).
        crate::arrow::Stream::fill(|out| unsafe {
            sys::a2pack_dataset_export_arrow_stream(self.raw, p, n, chunk_rows, workers, out)
        })
    }

    /// Statistics as a JSON object.
    pub fn stats_json(&self, workers: u32) -> Result<String> {
        let mut out = std::ptr::null_mut();
        // SAFETY: out receives an owned string.
        check(unsafe { sys::a2pack_dataset_stats_json(self.raw, workers, &mut out) })?;
        // SAFETY: owned NUL-terminated string.
        Ok(unsafe { owned_string(out) })
    }
}

/// Epoch sampler: batches of a permutation that depends only on
/// (seed, epoch). It is an [`Iterator`] over the current epoch's batches
/// (row positions); [`set_epoch`](Sampler::set_epoch) reshuffles and starts
/// over, and [`batch`](Sampler::batch) reads any batch directly.
///
/// ```
/// let mut s = a2pack::Sampler::new(None, 10, 42, 4, false)?;
/// assert_eq!(s.batch_count(), 3);
/// let mut all: Vec<usize> = s.by_ref().flatten().collect();
/// all.sort();
/// assert_eq!(all, (0..10).collect::<Vec<usize>>());
/// s.set_epoch(1)?;
/// assert_eq!(s.len(), 3);
/// assert_eq!(s.next(), Some(s.batch(0)?));
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct Sampler {
    raw: *mut sys::a2pack_dataset_sampler,
    batch_size: usize,
    /// The batch `next` returns.
    cursor: usize,
}

unsafe_send!(Sampler);

impl Drop for Sampler {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_dataset_sampler_close(self.raw) }
    }
}

impl fmt::Debug for Sampler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sampler")
            .field("batch_size", &self.batch_size)
            .field("batches", &self.batch_count())
            .field("next", &self.cursor)
            .finish()
    }
}

impl Sampler {
    /// A sampler over `indices` (row positions, copied), or over `0..n`
    /// when `None`.
    pub fn new(indices: Option<&[usize]>, n: usize, seed: u64, batch_size: usize, drop_last: bool) -> Result<Sampler> {
        let (ptr, n) = match indices {
            Some(i) => (positions_ptr(i), i.len() as u64),
            None => (std::ptr::null(), n as u64),
        };
        let mut out = std::ptr::null_mut();
        // SAFETY: n indices or NULL; copied.
        check(unsafe { sys::a2pack_dataset_sampler_open(ptr, n, seed, batch_size, i32::from(drop_last), &mut out) })?;
        Ok(Sampler { raw: out, batch_size, cursor: 0 })
    }

    /// Reshuffle for `epoch`; iteration starts again at batch 0.
    pub fn set_epoch(&mut self, epoch: u64) -> Result<()> {
        // SAFETY: owned sampler used through &mut.
        check(unsafe { sys::a2pack_dataset_sampler_set_epoch(self.raw, epoch) })?;
        self.cursor = 0;
        Ok(())
    }

    /// Batches per epoch.
    pub fn batch_count(&self) -> usize {
        // SAFETY: valid handle.
        unsafe { sys::a2pack_dataset_sampler_batch_count(self.raw) }
    }

    /// Batch `b` of the current epoch.
    pub fn batch(&self, b: usize) -> Result<Vec<usize>> {
        let mut out = vec![0usize; self.batch_size];
        let mut n = 0usize;
        // SAFETY: out has room for batch_size values (usize is int64_t's size).
        check(unsafe { sys::a2pack_dataset_sampler_batch(self.raw, b, out.as_mut_ptr().cast(), &mut n) })?;
        out.truncate(n);
        Ok(out)
    }
}

impl Sampler {
    /// The epoch the sampler is at.
    pub fn epoch(&self) -> u64 {
        // SAFETY: valid handle.
        unsafe { sys::a2pack_dataset_sampler_epoch(self.raw) }
    }

    /// The batch the iterator returns next (what a checkpoint records).
    pub fn position(&self) -> usize {
        self.cursor
    }

    /// Rank `rank` of `world`'s part of global batch `b`: a contiguous
    /// slice of it, so the ranks' parts are disjoint and together make the
    /// batch whatever `world` is (a checkpoint taken at one world size
    /// resumes at another without a row seen twice or dropped).
    pub fn part(&self, b: usize, rank: u32, world: u32) -> Result<Vec<usize>> {
        let mut out = vec![0usize; self.batch_size];
        let mut n = 0usize;
        // SAFETY: out has room for batch_size values (usize is int64_t's size).
        check(unsafe { sys::a2pack_dataset_sampler_part(self.raw, b, rank, world, out.as_mut_ptr().cast(), &mut n) })?;
        out.truncate(n);
        Ok(out)
    }

    /// A checkpoint of the position (seed, epoch and the iterator's next
    /// batch, with checks of the indices and batch size): a small versioned
    /// byte string, never the permutation.
    pub fn state(&self) -> Result<Vec<u8>> {
        let (mut data, mut len) = (std::ptr::null_mut(), 0usize);
        // SAFETY: out receives owned memory of len bytes.
        check(unsafe { sys::a2pack_dataset_sampler_state(self.raw, self.cursor as u64, &mut data, &mut len) })?;
        // SAFETY: owned memory of len bytes.
        Ok(unsafe { take_owned(data, len) })
    }

    /// Continue from a [`state`](Sampler::state) (also one taken in another
    /// process): the sampler adopts its seed and epoch and iterates from its
    /// next batch. Refused, naming what differs and leaving the sampler
    /// unchanged, for a damaged state, another version, or one taken over
    /// other indices, batch size or `drop_last`.
    pub fn load_state(&mut self, state: &[u8]) -> Result<()> {
        let mut next = 0u64;
        // SAFETY: len bytes read during the call.
        check(unsafe {
            sys::a2pack_dataset_sampler_load_state(self.raw, state.as_ptr().cast(), state.len(), &mut next)
        })?;
        self.cursor = next as usize;
        Ok(())
    }
}

/// Weighted mixing of several sources (row selections of one dataset, or
/// of several datasets): one endless sequence of global batches in which
/// source `i` has exactly `floor(w_i * B)` or `ceil(w_i * B)` rows (largest
/// remainder, never drifting), each source walking its own seeded
/// permutation and reshuffling when it runs out. Deterministic,
/// checkpointable in O(sources) bytes, weights changeable at a checkpoint.
/// Iterating yields whole global batches as (row, source) pairs; ranks take
/// their part with [`part`](Mix::part).
pub struct Mix {
    raw: *mut sys::a2pack_dataset_mix,
    batch_size: usize,
    sources: usize,
    /// The batch `next` returns.
    cursor: u64,
}

unsafe_send!(Mix);

impl Drop for Mix {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_dataset_mix_close(self.raw) }
    }
}

impl fmt::Debug for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mix")
            .field("sources", &self.sources)
            .field("batch_size", &self.batch_size)
            .field("next", &self.cursor)
            .finish()
    }
}

/// One global batch of a [`Mix`] (or a rank's part of it): the rows and the
/// source each came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MixBatch {
    /// Row positions in the dataset (or the datasets' common numbering).
    pub rows: Vec<usize>,
    /// For each row, the number of the source it came from.
    pub sources: Vec<u32>,
}

impl Mix {
    /// A mix of `sources` (each a row selection, or `MixSource::All(n)` for
    /// rows `0..n`) with `weights` (finite, >= 0, positive sum).
    pub fn new(sources: &[MixSource<'_>], weights: &[f64], seed: u64, batch_size: usize) -> Result<Mix> {
        if sources.len() != weights.len() {
            return Err(Error::new(
                Status::InvalidArgument,
                format!("{} sources but {} weights", sources.len(), weights.len()),
            ));
        }
        let raw_sources: Vec<sys::a2pack_dataset_mix_source> = sources
            .iter()
            .map(|s| match s {
                MixSource::Rows(r) => sys::a2pack_dataset_mix_source { indices: positions_ptr(r), n: r.len() as u64 },
                MixSource::All(n) => sys::a2pack_dataset_mix_source { indices: std::ptr::null(), n: *n as u64 },
            })
            .collect();
        let mut out = std::ptr::null_mut();
        // SAFETY: the sources' indices outlive the call (copied); weights has n values.
        check(unsafe {
            sys::a2pack_dataset_mix_open(
                raw_sources.as_ptr(),
                weights.as_ptr(),
                weights.len(),
                seed,
                batch_size,
                &mut out,
            )
        })?;
        Ok(Mix { raw: out, batch_size, sources: sources.len(), cursor: 0 })
    }

    /// The raw handle, for calls this crate does not wrap.
    pub fn as_ptr(&self) -> *const sys::a2pack_dataset_mix {
        self.raw
    }

    /// The number of sources.
    pub fn source_count(&self) -> usize {
        self.sources
    }

    /// The batch the iterator returns next (what a checkpoint records).
    pub fn position(&self) -> u64 {
        self.cursor
    }

    /// Rank `rank` of `world`'s part of global batch `b` (rank 0 of 1: the
    /// whole batch). Batches before the last weight change or loaded state
    /// are out of range.
    pub fn part(&mut self, b: u64, rank: u32, world: u32) -> Result<MixBatch> {
        let mut rows = vec![0usize; self.batch_size];
        let mut sources = vec![0u32; self.batch_size];
        let mut n = 0usize;
        // SAFETY: both outputs have room for batch_size values.
        check(unsafe {
            sys::a2pack_dataset_mix_batch(
                self.raw,
                b,
                rank,
                world,
                rows.as_mut_ptr().cast(),
                sources.as_mut_ptr(),
                &mut n,
            )
        })?;
        rows.truncate(n);
        sources.truncate(n);
        Ok(MixBatch { rows, sources })
    }

    /// Rows of each source in global batch `b`.
    pub fn counts(&self, b: u64) -> Result<Vec<u64>> {
        let mut out = vec![0u64; self.sources];
        // SAFETY: out has n_sources values.
        check(unsafe { sys::a2pack_dataset_mix_counts(self.raw, b, out.as_mut_ptr()) })?;
        Ok(out)
    }

    /// Rows of each source consumed by the batches before `b` (a source's
    /// epoch is that over its row count).
    pub fn consumed(&self, b: u64) -> Result<Vec<u64>> {
        let mut out = vec![0u64; self.sources];
        // SAFETY: out has n_sources values.
        check(unsafe { sys::a2pack_dataset_mix_consumed(self.raw, b, out.as_mut_ptr()) })?;
        Ok(out)
    }

    /// The weights, as given.
    pub fn weights(&self) -> Result<Vec<f64>> {
        let mut out = vec![0f64; self.sources];
        // SAFETY: out has n_sources values.
        check(unsafe { sys::a2pack_dataset_mix_get_weights(self.raw, out.as_mut_ptr()) })?;
        Ok(out)
    }

    /// Mix with `weights` from the iterator's next batch on (earlier batches
    /// keep the old proportions and can no longer be fetched).
    pub fn set_weights(&mut self, weights: &[f64]) -> Result<()> {
        // SAFETY: weights has len values, read during the call.
        check(unsafe { sys::a2pack_dataset_mix_set_weights(self.raw, weights.as_ptr(), weights.len(), self.cursor) })
    }

    /// A checkpoint of the position: seed, batch size, the iterator's next
    /// batch and per source its rows, weight and rows consumed (O(sources)
    /// bytes, never a permutation).
    pub fn state(&self) -> Result<Vec<u8>> {
        let (mut data, mut len) = (std::ptr::null_mut(), 0usize);
        // SAFETY: out receives owned memory of len bytes.
        check(unsafe { sys::a2pack_dataset_mix_state(self.raw, self.cursor, &mut data, &mut len) })?;
        // SAFETY: owned memory of len bytes.
        Ok(unsafe { take_owned(data, len) })
    }

    /// Continue from a [`state`](Mix::state): the mix adopts its seed and
    /// weights and iterates from its next batch. Refused, naming what
    /// differs and leaving the mix unchanged, for another source count,
    /// batch size, a source with other rows, another version or a damaged
    /// state.
    pub fn load_state(&mut self, state: &[u8]) -> Result<()> {
        let mut next = 0u64;
        // SAFETY: len bytes read during the call.
        check(unsafe { sys::a2pack_dataset_mix_load_state(self.raw, state.as_ptr().cast(), state.len(), &mut next) })?;
        self.cursor = next;
        Ok(())
    }
}

/// A source of a [`Mix`].
#[derive(Debug, Clone, Copy)]
pub enum MixSource<'a> {
    /// These row positions (copied when the mix is made).
    Rows(&'a [usize]),
    /// Rows `0..n`.
    All(usize),
}

impl Iterator for Mix {
    type Item = Result<MixBatch>;

    /// The next global batch (the mix never ends).
    fn next(&mut self) -> Option<Result<MixBatch>> {
        let b = self.part(self.cursor, 0, 1);
        if b.is_ok() {
            self.cursor += 1;
        }
        Some(b)
    }
}

impl Iterator for Sampler {
    type Item = Vec<usize>;

    /// The next batch of the current epoch; `None` after the last.
    fn next(&mut self) -> Option<Vec<usize>> {
        if self.cursor >= self.batch_count() {
            return None;
        }
        let b = self.batch(self.cursor).ok()?;
        self.cursor += 1;
        Some(b)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.batch_count().saturating_sub(self.cursor);
        (left, Some(left))
    }
}

impl ExactSizeIterator for Sampler {}

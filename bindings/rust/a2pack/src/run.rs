//! Run files (.a2run2, v1 `A2T1` and v2 postcard) and columnar run batches.

use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

use a2pack_sys as sys;

use crate::board::Board;
use crate::error::{check, Error, Result, Status};
use crate::ffi::{path_cstr, take_owned, unsafe_send, view};

/// Format of a run payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunKind {
    /// Not known (not a value the library hands out for a decoded run).
    Unknown,
    /// v1: `"A2T1"` 0x01, no branch values.
    V1,
    /// v2: postcard, the upstream tool's current format.
    V2,
}

impl RunKind {
    pub(crate) fn raw(self) -> sys::a2pack_run_kind {
        match self {
            RunKind::Unknown => sys::A2PACK_RUN_KIND_UNKNOWN,
            RunKind::V1 => sys::A2PACK_RUN_V1,
            RunKind::V2 => sys::A2PACK_RUN_V2,
        }
    }

    pub(crate) fn from_raw(raw: u32) -> RunKind {
        match raw {
            x if x == sys::A2PACK_RUN_V1 => RunKind::V1,
            x if x == sys::A2PACK_RUN_V2 => RunKind::V2,
            _ => RunKind::Unknown,
        }
    }

    /// Kind of a payload by its first bytes (never fails).
    ///
    /// ```
    /// use a2pack::RunKind;
    /// assert_eq!(RunKind::detect(b"A2T1\x01\x00\x00"), RunKind::V1);
    /// assert_eq!(RunKind::detect(b"\x05"), RunKind::V2);
    /// ```
    pub fn detect(data: &[u8]) -> RunKind {
        // SAFETY: reads `data.len()` bytes.
        RunKind::from_raw(unsafe { sys::a2pack_run_detect_kind(data.as_ptr(), data.len()) })
    }
}

/// Run metadata (an owned copy of `a2pack_run_meta`).
///
/// ```
/// let meta = a2pack::RunMeta { steps: 1, max_score: 4, engine: None, ..Default::default() };
/// let run = a2pack::Run::new(&meta, &[0x1100_0000_0000_0000], &[2], None, 0x2000_0000_0000_0001)?;
/// assert_eq!(run.meta()?, meta);
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunMeta {
    /// `meta.steps` as stored.
    pub steps: u32,
    /// Start time, 0 = unknown.
    pub start_unix_s: u64,
    /// Seconds the game took.
    pub elapsed_s: f32,
    /// Highest score reached.
    pub max_score: u64,
    /// Highest tile value, e.g. 2048.
    pub highest_tile: u32,
    /// The engine string, `None` when the run stores none.
    pub engine: Option<String>,
}

/// The steps of a run as arrays (an owned copy).
///
/// ```
/// let run = a2pack::GenOptions::new().policy(a2pack::Policy::Greedy).max_steps(10).run(3)?;
/// let steps = run.steps();
/// assert_eq!(steps.boards.len(), run.len());
/// assert!(steps.moves.iter().zip(&steps.legal_masks).all(|(&m, &legal)| legal & (1 << m) != 0));
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Steps {
    /// Board before each step.
    pub boards: Vec<u64>,
    /// Chosen move 0..3 of each step.
    pub moves: Vec<u8>,
    /// Branch values (Up, Down, Left, Right), 0 where illegal or absent.
    pub values: Vec<[f32; 4]>,
    /// Bit i = move i legal; 0 when the step stores no branches.
    pub legal_masks: Vec<u8>,
    /// 1 when the step stores branches.
    pub branch_present: Vec<u8>,
}

/// Branch values given to [`Run::new`]: one entry per step.
///
/// ```
/// use a2pack::{Branches, Run, RunMeta};
/// let values = [[0.5, 0.0, 1.0, 0.25]];
/// let b = Branches { values: &values, legal_masks: &[0b1101], present: None };
/// let run = Run::new(&RunMeta { steps: 1, ..Default::default() }, &[0x1100_0000_0000_0000], &[2], Some(b), 0)?;
/// assert!(run.has_branches());
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Branches<'a> {
    /// Expected values per step (Up, Down, Left, Right); illegal ones are ignored.
    pub values: &'a [[f32; 4]],
    /// Bit i = move i legal.
    pub legal_masks: &'a [u8],
    /// Which steps carry branches (`None` = all).
    pub present: Option<&'a [u8]>,
}

/// A decoded run, always in v2 shape (a v1 file is upgraded on decode).
///
/// ```
/// use a2pack::{Run, RunKind, RunMeta};
/// let meta = RunMeta { steps: 2, engine: Some("demo".into()), ..Default::default() };
/// let run = Run::new(&meta, &[0x1100_0000_0000_0000, 0x2000_0000_0000_0000], &[2, 1], None, 0x0000_0000_0000_2001)?;
/// assert_eq!(run.len(), 2);
/// assert_eq!(run.moves(), &[2, 1]);
/// let bytes = run.encode(RunKind::V2)?;
/// assert_eq!(Run::decode(&bytes)?.meta()?.engine.as_deref(), Some("demo"));
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct Run {
    raw: *mut sys::a2pack_run,
    steps: OnceLock<Steps>,
}

unsafe_send!(Run);

impl Drop for Run {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_run_close(self.raw) }
    }
}

impl fmt::Debug for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run").field("steps", &self.len()).field("meta", &self.meta().ok()).finish()
    }
}

impl PartialEq for Run {
    /// Runs are equal when their canonical v2 encodings are.
    fn eq(&self, other: &Run) -> bool {
        match (self.encode(RunKind::V2), other.encode(RunKind::V2)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

impl Run {
    /// Take ownership of a run handle.
    ///
    /// # Safety
    /// `raw` is a non-NULL owned `a2pack_run*`.
    pub(crate) unsafe fn from_raw(raw: *mut sys::a2pack_run) -> Run {
        Run { raw, steps: OnceLock::new() }
    }

    /// The raw handle, for calls through `a2pack-sys` (still owned by `self`).
    pub fn as_ptr(&self) -> *const sys::a2pack_run {
        self.raw
    }

    /// Read and decode a run file (v1 is upgraded).
    pub fn load(path: impl AsRef<Path>) -> Result<Run> {
        let path = path_cstr(path.as_ref())?;
        let mut out = std::ptr::null_mut();
        // SAFETY: valid path; out receives an owned run.
        check(unsafe { sys::a2pack_run_load(path.as_ptr(), &mut out) })?;
        // SAFETY: owned, non-NULL on success.
        Ok(unsafe { Run::from_raw(out) })
    }

    /// Decode a run from bytes (kind detected). The bytes are copied.
    pub fn decode(data: &[u8]) -> Result<Run> {
        let mut out = std::ptr::null_mut();
        // SAFETY: reads `data`; out receives an owned run.
        check(unsafe { sys::a2pack_run_decode(data.as_ptr(), data.len(), &mut out) })?;
        // SAFETY: owned, non-NULL on success.
        Ok(unsafe { Run::from_raw(out) })
    }

    /// Build a run: `boards[i]` is the board before step i, `moves[i]` its
    /// move; `branches` (one entry per step) or `None`.
    pub fn new(
        meta: &RunMeta,
        boards: &[u64],
        moves: &[u8],
        branches: Option<Branches<'_>>,
        final_board: u64,
    ) -> Result<Run> {
        let n = boards.len();
        let mismatch = |what: &str, len: usize| {
            Error::new(Status::InvalidArgument, format!("{what} has {len} entries for {n} steps"))
        };
        if moves.len() != n {
            return Err(mismatch("moves", moves.len()));
        }
        let (values, masks, present) = match branches {
            None => (std::ptr::null(), std::ptr::null(), std::ptr::null()),
            Some(b) => {
                if b.values.len() != n {
                    return Err(mismatch("branch values", b.values.len()));
                }
                if b.legal_masks.len() != n {
                    return Err(mismatch("legal masks", b.legal_masks.len()));
                }
                let present = match b.present {
                    Some(p) if p.len() != n => return Err(mismatch("branch_present", p.len())),
                    Some(p) => p.as_ptr(),
                    None => std::ptr::null(),
                };
                (b.values.as_ptr().cast::<f32>(), b.legal_masks.as_ptr(), present)
            }
        };
        let engine = meta.engine.as_deref();
        let raw_meta = sys::a2pack_run_meta {
            size: std::mem::size_of::<sys::a2pack_run_meta>(),
            steps: meta.steps,
            start_unix_s: meta.start_unix_s,
            elapsed_s: meta.elapsed_s,
            max_score: meta.max_score,
            highest_tile: meta.highest_tile,
            has_engine: i32::from(engine.is_some()),
            engine: engine.map_or(std::ptr::null(), |e| e.as_ptr().cast()),
            engine_len: engine.map_or(0, str::len),
        };
        let mut out = std::ptr::null_mut();
        // SAFETY: every array has n entries (checked above); all are copied.
        check(unsafe {
            sys::a2pack_run_create(
                &raw_meta,
                n,
                boards.as_ptr(),
                moves.as_ptr(),
                values,
                masks,
                present,
                final_board,
                &mut out,
            )
        })?;
        // SAFETY: owned, non-NULL on success.
        Ok(unsafe { Run::from_raw(out) })
    }

    /// Number of steps (length of the steps vector).
    pub fn len(&self) -> usize {
        // SAFETY: valid handle.
        unsafe { sys::a2pack_run_step_count(self.raw) }
    }

    /// Whether the run has no steps.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Kind of the bytes the run was decoded from (V2 for made runs).
    pub fn source_kind(&self) -> RunKind {
        // SAFETY: valid handle.
        RunKind::from_raw(unsafe { sys::a2pack_run_source_kind(self.raw) })
    }

    /// The run's metadata.
    pub fn meta(&self) -> Result<RunMeta> {
        let mut m = sys::a2pack_run_meta { size: std::mem::size_of::<sys::a2pack_run_meta>(), ..Default::default() };
        // SAFETY: size set; the engine is a view copied at once.
        check(unsafe { sys::a2pack_run_get_meta(self.raw, &mut m) })?;
        let engine = (m.has_engine != 0).then(|| {
            // SAFETY: engine_len bytes valid while the run lives.
            String::from_utf8_lossy(unsafe { view(m.engine.cast::<u8>(), m.engine_len) }).into_owned()
        });
        Ok(RunMeta {
            steps: m.steps,
            start_unix_s: m.start_unix_s,
            elapsed_s: m.elapsed_s,
            max_score: m.max_score,
            highest_tile: m.highest_tile,
            engine,
        })
    }

    /// The board after the last step.
    pub fn final_board(&self) -> Board {
        // SAFETY: valid handle.
        Board(unsafe { sys::a2pack_run_final_board(self.raw) })
    }

    /// Whether at least one step carries branch values.
    pub fn has_branches(&self) -> bool {
        // SAFETY: valid handle.
        unsafe { sys::a2pack_run_has_branches(self.raw) != 0 }
    }

    /// Copy steps `[first, first + n)` into a new [`Steps`].
    pub fn steps_range(&self, first: usize, n: usize) -> Result<Steps> {
        let mut s = Steps {
            boards: vec![0; n],
            moves: vec![0; n],
            values: vec![[0.0; 4]; n],
            legal_masks: vec![0; n],
            branch_present: vec![0; n],
        };
        // SAFETY: every output holds n entries.
        check(unsafe {
            sys::a2pack_run_get_steps(
                self.raw,
                first,
                n,
                s.boards.as_mut_ptr(),
                s.moves.as_mut_ptr(),
                s.values.as_mut_ptr().cast(),
                s.legal_masks.as_mut_ptr(),
                s.branch_present.as_mut_ptr(),
            )
        })?;
        Ok(s)
    }

    /// Every step, copied out once and kept with the run.
    pub fn steps(&self) -> &Steps {
        self.steps.get_or_init(|| self.steps_range(0, self.len()).expect("a run's own step range is in range"))
    }

    /// Board before each step.
    pub fn boards(&self) -> &[u64] {
        &self.steps().boards
    }

    /// Chosen move 0..3 of each step.
    pub fn moves(&self) -> &[u8] {
        &self.steps().moves
    }

    /// Encode as v1 or v2 bytes. A run with branches fails as v1 (v1 cannot
    /// store them) unless [`Run::encode_dropping_branches`] is used.
    pub fn encode(&self, kind: RunKind) -> Result<Vec<u8>> {
        self.encode_flags(kind, 0)
    }

    /// Encode, dropping branch values (for v1).
    pub fn encode_dropping_branches(&self, kind: RunKind) -> Result<Vec<u8>> {
        self.encode_flags(kind, sys::A2PACK_ENCODE_DROP_BRANCHES)
    }

    fn encode_flags(&self, kind: RunKind, flags: u32) -> Result<Vec<u8>> {
        let (mut data, mut len) = (std::ptr::null_mut(), 0usize);
        // SAFETY: valid handle; data receives owned memory.
        check(unsafe { sys::a2pack_run_encode(self.raw, kind.raw(), flags, &mut data, &mut len) })?;
        // SAFETY: owned memory of len bytes.
        Ok(unsafe { take_owned(data, len) })
    }

    /// Encode and write to `path` atomically.
    pub fn save(&self, path: impl AsRef<Path>, kind: RunKind) -> Result<()> {
        let path = path_cstr(path.as_ref())?;
        // SAFETY: valid handle and path.
        check(unsafe { sys::a2pack_run_save(self.raw, path.as_ptr(), kind.raw(), 0) })
    }

    /// Upgrade a v1 payload to v2 bytes (a v2 payload is checked and copied).
    pub fn upgrade_v1(data: &[u8]) -> Result<Vec<u8>> {
        let (mut out, mut len) = (std::ptr::null_mut(), 0usize);
        // SAFETY: reads data; out receives owned memory.
        check(unsafe { sys::a2pack_run_upgrade_v1(data.as_ptr(), data.len(), &mut out, &mut len) })?;
        // SAFETY: owned memory of len bytes.
        Ok(unsafe { take_owned(out, len) })
    }
}

/// Many runs decoded into flat arrays (see [`RunBatch::columns`]).
///
/// ```
/// let runs: Vec<Vec<u8>> = (0..3)
///     .map(|seed| a2pack::GenOptions::new().policy(a2pack::Policy::Random).run(seed)?.encode(a2pack::RunKind::V2))
///     .collect::<Result<_, _>>()?;
/// let batch = a2pack::RunBatch::decode(&runs, 0)?;
/// let cols = batch.columns();
/// assert_eq!(cols.n_runs(), 3);
/// assert_eq!(cols.step_offsets[3] as usize, cols.boards.len());
/// # Ok::<(), a2pack::Error>(())
/// ```
pub struct RunBatch {
    raw: *mut sys::a2pack_run_batch,
}

unsafe_send!(RunBatch);

impl Drop for RunBatch {
    fn drop(&mut self) {
        // SAFETY: owned handle, released once.
        unsafe { sys::a2pack_run_batch_close(self.raw) }
    }
}

impl fmt::Debug for RunBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.columns();
        f.debug_struct("RunBatch").field("runs", &c.n_runs()).field("steps", &c.boards.len()).finish()
    }
}

/// The arrays of a [`RunBatch`], borrowed from it. Steps of run r are
/// `step_offsets[r] .. step_offsets[r + 1]`.
///
/// ```
/// let run = a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(5).run(1)?;
/// let batch = a2pack::RunBatch::decode(&[run.encode(a2pack::RunKind::V2)?], 1)?;
/// let cols = batch.columns();
/// assert_eq!(&cols.boards[cols.run_steps(0)], run.boards());
/// assert_eq!(cols.engine(0), run.meta()?.engine.as_deref());
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RunColumns<'a> {
    /// n_runs + 1 offsets into the step arrays.
    pub step_offsets: &'a [u64],
    /// Board before each step.
    pub boards: &'a [u64],
    /// Chosen move of each step.
    pub moves: &'a [u8],
    /// Branch values per step (Up, Down, Left, Right); 0 where illegal/absent.
    pub branch_values: &'a [[f32; 4]],
    /// Bit i = move i legal; 0 when absent.
    pub legal_masks: &'a [u8],
    /// 1 when the step stored branches.
    pub branch_present: &'a [u8],
    /// Final board of each run.
    pub final_boards: &'a [u64],
    /// meta.steps of each run.
    pub meta_steps: &'a [u32],
    /// Start time of each run.
    pub start_unix_s: &'a [u64],
    /// Elapsed seconds of each run.
    pub elapsed_s: &'a [f32],
    /// Max score of each run.
    pub max_score: &'a [u64],
    /// Highest tile of each run.
    pub highest_tile: &'a [u32],
    /// Payload kind (1 = v1, 2 = v2) of each run.
    pub source_kind: &'a [u8],
    /// 1 when the run stores an engine string.
    pub has_engine: &'a [u8],
    /// n_runs + 1 offsets into `engine_bytes`.
    pub engine_offsets: &'a [u64],
    /// The engine strings, concatenated.
    pub engine_bytes: &'a [u8],
}

impl<'a> RunColumns<'a> {
    /// Number of runs.
    pub fn n_runs(&self) -> usize {
        self.final_boards.len()
    }

    /// The steps of run `r` as a range into the step arrays.
    pub fn run_steps(&self, r: usize) -> std::ops::Range<usize> {
        self.step_offsets[r] as usize..self.step_offsets[r + 1] as usize
    }

    /// Engine string of run `r` (`None` when it stores none).
    pub fn engine(&self, r: usize) -> Option<&'a str> {
        if self.has_engine[r] == 0 {
            return None;
        }
        let bytes = &self.engine_bytes[self.engine_offsets[r] as usize..self.engine_offsets[r + 1] as usize];
        std::str::from_utf8(bytes).ok()
    }
}

impl RunBatch {
    /// Take ownership of a batch handle.
    ///
    /// # Safety
    /// `raw` is a non-NULL owned `a2pack_run_batch*`.
    pub(crate) unsafe fn from_raw(raw: *mut sys::a2pack_run_batch) -> RunBatch {
        RunBatch { raw }
    }

    /// Decode payloads (v1 or v2 each) into one batch on up to `workers`
    /// threads (0 = all cores).
    pub fn decode<B: AsRef<[u8]>>(payloads: &[B], workers: u32) -> Result<RunBatch> {
        let ptrs: Vec<*const u8> = payloads.iter().map(|p| p.as_ref().as_ptr()).collect();
        let lens: Vec<usize> = payloads.iter().map(|p| p.as_ref().len()).collect();
        let mut out = std::ptr::null_mut();
        // SAFETY: n pointers and lengths, read during the call.
        check(unsafe { sys::a2pack_run_batch_decode(ptrs.as_ptr(), lens.as_ptr(), ptrs.len(), workers, &mut out) })?;
        // SAFETY: owned, non-NULL on success.
        Ok(unsafe { RunBatch::from_raw(out) })
    }

    /// Read run files (v1 or v2 each) and decode them into one batch: the
    /// library's workers (`workers`, 0 = all cores) read and decode the files
    /// in parallel. An unreadable or corrupt file is an `Err` naming its path.
    ///
    /// ```no_run
    /// let batch = a2pack::RunBatch::load(&["runs/a.a2run2", "runs/b.a2run2"], 0)?;
    /// println!("{} runs from {} bytes", batch.columns().n_runs(), batch.payload_bytes());
    /// # Ok::<(), a2pack::Error>(())
    /// ```
    pub fn load<P: AsRef<Path>>(paths: &[P], workers: u32) -> Result<RunBatch> {
        let owned = paths.iter().map(|p| path_cstr(p.as_ref())).collect::<Result<Vec<_>>>()?;
        let ptrs: Vec<*const std::ffi::c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let mut out = std::ptr::null_mut();
        // SAFETY: n NUL-terminated paths, read during the call.
        check(unsafe { sys::a2pack_run_batch_load(ptrs.as_ptr(), ptrs.len(), workers, &mut out) })?;
        // SAFETY: owned, non-NULL on success.
        Ok(unsafe { RunBatch::from_raw(out) })
    }

    /// Total encoded bytes the batch was decoded from (payloads or files).
    pub fn payload_bytes(&self) -> u64 {
        // SAFETY: a valid handle.
        unsafe { sys::a2pack_run_batch_payload_bytes(self.raw) }
    }

    /// Views of the batch's arrays.
    pub fn columns(&self) -> RunColumns<'_> {
        let mut c =
            sys::a2pack_run_columns { size: std::mem::size_of::<sys::a2pack_run_columns>(), ..Default::default() };
        // SAFETY: size set; a valid batch cannot fail here.
        let status = unsafe { sys::a2pack_run_batch_columns(self.raw, &mut c) };
        assert_eq!(status, 0, "a2pack_run_batch_columns failed on a valid batch");
        let (r, s) = (c.n_runs, c.n_steps);
        // SAFETY: the views live as long as the batch, which `'_` borrows.
        unsafe {
            RunColumns {
                step_offsets: view(c.step_offsets, r + 1),
                boards: view(c.boards, s),
                moves: view(c.moves, s),
                branch_values: view(c.branch_values.cast::<[f32; 4]>(), s),
                legal_masks: view(c.legal_masks, s),
                branch_present: view(c.branch_present, s),
                final_boards: view(c.final_boards, r),
                meta_steps: view(c.meta_steps, r),
                start_unix_s: view(c.start_unix_s, r),
                elapsed_s: view(c.elapsed_s, r),
                max_score: view(c.max_score, r),
                highest_tile: view(c.highest_tile, r),
                source_kind: view(c.source_kind, r),
                has_engine: view(c.has_engine, r),
                engine_offsets: view(c.engine_offsets, r + 1),
                engine_bytes: view(c.engine_bytes.cast::<u8>(), engine_len(&c)),
            }
        }
    }

    /// Number of runs.
    pub fn len(&self) -> usize {
        self.columns().n_runs()
    }

    /// The batch as an Arrow record batch (see [`crate::arrow::RecordBatch`]).
    pub fn to_arrow(&self, layout: crate::arrow::Layout) -> Result<crate::arrow::RecordBatch> {
        // SAFETY: valid batch; the export keeps it alive.
        crate::arrow::export(|s, a| unsafe { sys::a2pack_run_batch_export_arrow(self.raw, layout.raw(), s, a) })
    }

    /// Whether the batch holds no run.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn engine_len(c: &sys::a2pack_run_columns) -> usize {
    if c.engine_offsets.is_null() {
        return 0;
    }
    // SAFETY: engine_offsets has n_runs + 1 entries.
    unsafe { *c.engine_offsets.add(c.n_runs) as usize }
}

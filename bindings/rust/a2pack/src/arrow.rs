//! The Arrow C Data Interface exports of the library: run batches, dataset
//! rows, pack tables, bag batches and decoded logs as Arrow record batches
//! (a struct-typed `ArrowSchema` plus an `ArrowArray`) or streams of them.
//!
//! The structs are the spec's (`a2pack::sys::ArrowSchema`, `ArrowArray`,
//! `ArrowArrayStream`); the owners here call their `release` on drop, or
//! hand them over with `into_raw` to any Arrow library that imports the C
//! Data Interface (arrow-rs's `arrow::ffi`, Polars, DuckDB...). Which
//! columns are zero-copy views and which one fresh copy is documented per
//! function in `a2pack.h`; exports keep what they view alive, so the source
//! handle may be dropped first.

use std::ffi::CStr;
use std::fmt;

use a2pack_sys as sys;

use crate::error::{Error, Result, Status};
use crate::ffi::unsafe_send;

/// Rows of a run-batch export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One row per step.
    Steps,
    /// One row per run.
    Runs,
}

impl Layout {
    pub(crate) fn raw(self) -> sys::a2pack_arrow_layout {
        match self {
            Layout::Steps => sys::A2PACK_ARROW_STEPS,
            Layout::Runs => sys::A2PACK_ARROW_RUNS,
        }
    }
}

/// An owned `ArrowSchema` (released on drop).
pub struct Schema {
    pub(crate) raw: sys::ArrowSchema,
}

unsafe_send!(Schema);

impl Drop for Schema {
    fn drop(&mut self) {
        if let Some(release) = self.raw.release {
            // SAFETY: released exactly once, as the spec asks.
            unsafe { release(&mut self.raw) };
        }
    }
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schema").field("format", &self.format()).field("fields", &self.field_names()).finish()
    }
}

fn text(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: NUL-terminated strings of a live schema.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl Schema {
    pub(crate) fn empty() -> Schema {
        // SAFETY: all-zero is the spec's "released" state (release NULL).
        Schema { raw: unsafe { std::mem::zeroed() } }
    }

    /// The format string (`"+s"` for a record batch's struct type).
    pub fn format(&self) -> String {
        text(self.raw.format)
    }

    /// The names of the children (the columns of a record batch).
    pub fn field_names(&self) -> Vec<String> {
        (0..self.raw.n_children.max(0) as usize)
            // SAFETY: n_children valid child pointers while the schema lives.
            .map(|i| text(unsafe { (**self.raw.children.add(i)).name }))
            .collect()
    }

    /// The format string of child `i` (e.g. `"L"` for uint64).
    pub fn field_format(&self, i: usize) -> Option<String> {
        // SAFETY: as above.
        (i < self.raw.n_children.max(0) as usize).then(|| text(unsafe { (**self.raw.children.add(i)).format }))
    }

    /// The raw struct, for importing without taking ownership.
    pub fn as_raw(&self) -> &sys::ArrowSchema {
        &self.raw
    }

    /// Hand the struct over: the receiver calls its `release` once.
    pub fn into_raw(self) -> sys::ArrowSchema {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }
}

/// An owned `ArrowArray` (released on drop).
pub struct Array {
    pub(crate) raw: sys::ArrowArray,
}

unsafe_send!(Array);

impl Drop for Array {
    fn drop(&mut self) {
        if let Some(release) = self.raw.release {
            // SAFETY: released exactly once, as the spec asks.
            unsafe { release(&mut self.raw) };
        }
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Array").field("len", &self.len()).finish()
    }
}

impl Array {
    pub(crate) fn empty() -> Array {
        // SAFETY: all-zero is the spec's "released" state (release NULL).
        Array { raw: unsafe { std::mem::zeroed() } }
    }

    /// Rows.
    pub fn len(&self) -> usize {
        self.raw.length as usize
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values of child `i` read as a fixed-width primitive column
    /// (buffer 1; e.g. `u64` for a board column), borrowed from the array.
    ///
    /// # Safety
    /// `T` must match the child's format (see [`Schema::field_format`]).
    pub unsafe fn column<T: Copy>(&self, i: usize) -> Option<&[T]> {
        if i >= self.raw.n_children.max(0) as usize {
            return None;
        }
        let child = &**self.raw.children.add(i);
        if child.n_buffers < 2 {
            return None;
        }
        let values = (*child.buffers.add(1)).cast::<T>();
        Some(crate::ffi::view(values.add(child.offset as usize), child.length as usize))
    }

    /// The raw struct, for importing without taking ownership.
    pub fn as_raw(&self) -> &sys::ArrowArray {
        &self.raw
    }

    /// Hand the struct over: the receiver calls its `release` once.
    pub fn into_raw(self) -> sys::ArrowArray {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }
}

/// A record batch: its schema and its array.
///
/// ```
/// let run = a2pack::GenOptions::new().policy(a2pack::Policy::Random).max_steps(6).run(1)?;
/// let batch = a2pack::RunBatch::decode(&[run.encode(a2pack::RunKind::V2)?], 1)?;
/// let rb = batch.to_arrow(a2pack::arrow::Layout::Steps)?;
/// drop(batch); // the export keeps what it views alive
/// assert_eq!(rb.schema.format(), "+s");
/// assert_eq!(rb.array.len(), run.len());
/// let names = rb.schema.field_names();
/// let board = names.iter().position(|n| n == "board").unwrap();
/// assert_eq!(unsafe { rb.array.column::<u64>(board) }.unwrap(), run.boards());
/// # Ok::<(), a2pack::Error>(())
/// ```
#[derive(Debug)]
pub struct RecordBatch {
    /// The struct type, one child per column.
    pub schema: Schema,
    /// The rows.
    pub array: Array,
}

/// Call an export filling a schema and an array.
pub(crate) fn export(
    f: impl FnOnce(*mut sys::ArrowSchema, *mut sys::ArrowArray) -> sys::a2pack_status,
) -> Result<RecordBatch> {
    let (mut schema, mut array) = (Schema::empty(), Array::empty());
    crate::error::check(f(&mut schema.raw, &mut array.raw))?;
    Ok(RecordBatch { schema, array })
}

/// An owned `ArrowArrayStream` of record batches (released on drop); an
/// `Iterator` over its arrays. Used by one thread at a time.
pub struct Stream {
    raw: sys::ArrowArrayStream,
}

unsafe_send!(Stream);

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some(release) = self.raw.release {
            // SAFETY: released exactly once.
            unsafe { release(&mut self.raw) };
        }
    }
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream").finish_non_exhaustive()
    }
}

impl Stream {
    pub(crate) fn fill(f: impl FnOnce(*mut sys::ArrowArrayStream) -> sys::a2pack_status) -> Result<Stream> {
        // SAFETY: all-zero is the released state.
        let mut s = Stream { raw: unsafe { std::mem::zeroed() } };
        crate::error::check(f(&mut s.raw))?;
        Ok(s)
    }

    fn stream_error(&mut self, code: i32) -> Error {
        let msg = match self.raw.get_last_error {
            // SAFETY: a live stream's message, copied at once.
            Some(get) => text(unsafe { get(&mut self.raw) }),
            None => String::new(),
        };
        Error::new(Status::Io, format!("Arrow stream: {msg} (errno {code})"))
    }

    /// The schema of every batch.
    pub fn schema(&mut self) -> Result<Schema> {
        let mut s = Schema::empty();
        let get = self.raw.get_schema.expect("a live stream has get_schema");
        // SAFETY: live stream; s receives an owned schema.
        let code = unsafe { get(&mut self.raw, &mut s.raw) };
        if code != 0 {
            return Err(self.stream_error(code));
        }
        Ok(s)
    }

    /// Hand the struct over: the receiver calls its `release` once.
    pub fn into_raw(self) -> sys::ArrowArrayStream {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }
}

impl Iterator for Stream {
    type Item = Result<Array>;

    fn next(&mut self) -> Option<Result<Array>> {
        let mut a = Array::empty();
        let get = self.raw.get_next?;
        // SAFETY: live stream; a receives an owned array (released = end).
        let code = unsafe { get(&mut self.raw, &mut a.raw) };
        if code != 0 {
            return Some(Err(self.stream_error(code)));
        }
        a.raw.release.is_some().then_some(Ok(a))
    }
}

//! Small helpers shared by the modules: C strings from paths and text, owned
//! library memory, callbacks that never unwind into C.

use std::any::Any;
use std::ffi::{c_char, c_int, c_void, CString};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;

use a2pack_sys as sys;

use crate::error::{Error, Result, Status};

/// A path as a C string (its bytes; paths are byte strings on Unix).
pub(crate) fn path_cstr(path: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::new(Status::InvalidArgument, format!("{}: path holds a NUL byte", path.display())))
}

pub(crate) fn text_cstr(what: &str, text: &str) -> Result<CString> {
    CString::new(text).map_err(|_| Error::new(Status::InvalidArgument, format!("{what} holds a NUL byte")))
}

/// Copy `len` bytes the library handed out as "owned" and release them.
///
/// # Safety
/// `ptr` is NULL or owned memory of at least `len` bytes from the library.
pub(crate) unsafe fn take_owned<T: Copy>(ptr: *mut T, len: usize) -> Vec<T> {
    if ptr.is_null() {
        return Vec::new();
    }
    let v = std::slice::from_raw_parts(ptr, len).to_vec();
    sys::a2pack_free(ptr.cast());
    v
}

/// A slice from a C view that may be NULL when empty.
///
/// # Safety
/// `ptr` is NULL or valid for `len` elements for the lifetime `'a`.
pub(crate) unsafe fn view<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(ptr, len)
    }
}

/// A progress closure as the C API's `(fn, user)` pair. The closure returns
/// `true` to go on and `false` to stop the operation (which then fails with
/// [`Status::Interrupted`]). A panic inside it is caught at the boundary
/// (the operation is asked to stop) and resumed once the C call returned, so
/// no unwinding ever crosses C frames.
pub(crate) struct Progress<'a> {
    f: Option<&'a mut dyn FnMut(u64, u64) -> bool>,
    panic: Option<Box<dyn Any + Send>>,
}

impl<'a> Progress<'a> {
    pub(crate) fn new(f: Option<&'a mut dyn FnMut(u64, u64) -> bool>) -> Progress<'a> {
        Progress { f, panic: None }
    }

    /// The callback and its user pointer (NULL callback without a closure).
    pub(crate) fn raw(&mut self) -> (sys::a2pack_progress_fn, *mut c_void) {
        if self.f.is_none() {
            return (None, std::ptr::null_mut());
        }
        (Some(progress_trampoline), (self as *mut Progress<'a>).cast())
    }

    /// After the C call: resume a panic the closure raised, else the result.
    pub(crate) fn finish<T>(self, result: Result<T>) -> Result<T> {
        if let Some(payload) = self.panic {
            resume_unwind(payload);
        }
        result
    }
}

unsafe extern "C" fn progress_trampoline(user: *mut c_void, done: u64, total: u64) -> c_int {
    // SAFETY: `user` is the Progress that raw() handed out, alive for the call.
    let state = &mut *user.cast::<Progress<'_>>();
    if state.panic.is_some() {
        return 1;
    }
    let Some(f) = state.f.as_mut() else { return 0 };
    match catch_unwind(AssertUnwindSafe(|| f(done, total))) {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(payload) => {
            state.panic = Some(payload);
            1
        }
    }
}

/// Run `f` with the progress closure wired up; resume its panic afterwards.
pub(crate) fn with_progress<T>(
    progress: Option<&mut dyn FnMut(u64, u64) -> bool>,
    f: impl FnOnce(sys::a2pack_progress_fn, *mut c_void) -> Result<T>,
) -> Result<T> {
    let mut state = Progress::new(progress);
    let (cb, user) = state.raw();
    let result = f(cb, user);
    state.finish(result)
}

/// Borrowed C strings of many paths, kept alive with their pointer array.
pub(crate) struct CPaths {
    _owned: Vec<CString>,
    ptrs: Vec<*const c_char>,
}

impl CPaths {
    pub(crate) fn new<P: AsRef<Path>>(paths: &[P]) -> Result<CPaths> {
        let owned = paths.iter().map(|p| path_cstr(p.as_ref())).collect::<Result<Vec<_>>>()?;
        let ptrs = owned.iter().map(|c| c.as_ptr()).collect();
        Ok(CPaths { _owned: owned, ptrs })
    }

    pub(crate) fn as_ptr(&self) -> *const *const c_char {
        self.ptrs.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.ptrs.len()
    }
}

/// Declare `Send`/`Sync` for a handle type, with the header's words as the
/// reason.
macro_rules! unsafe_send {
    ($t:ty) => {
        // SAFETY: the header allows a handle to be used from different
        // threads, one at a time ("different handles may be used from
        // different threads freely").
        unsafe impl Send for $t {}
    };
}
macro_rules! unsafe_sync {
    ($t:ty) => {
        // SAFETY: the header's section documents that this handle may be
        // used from several threads at once.
        unsafe impl Sync for $t {}
    };
}
pub(crate) use {unsafe_send, unsafe_sync};

/// Collects the paths a `a2pack_removed_fn` is told about.
pub(crate) unsafe extern "C" fn collect_path(user: *mut c_void, path: *const c_char) {
    // SAFETY: `user` is the Vec the caller wired; `path` NUL-terminated.
    // Pushing a PathBuf cannot panic short of allocation failure (abort).
    let out = &mut *user.cast::<Vec<std::path::PathBuf>>();
    if !path.is_null() {
        use std::os::unix::ffi::OsStrExt;
        let bytes = std::ffi::CStr::from_ptr(path).to_bytes();
        out.push(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(bytes)));
    }
}

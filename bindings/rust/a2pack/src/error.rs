//! Errors: the library's status as an enum plus the message it left for the
//! calling thread (`a2pack_last_error`), which names the file, offset or
//! index and what was wrong.

use std::ffi::CStr;
use std::fmt;

use a2pack_sys as sys;

/// The kind of failure, one per `A2PACK_E_*` status of the C API.
///
/// ```
/// use a2pack::Status;
/// assert_eq!(Status::from_code(-3), Some(Status::Corrupt));
/// assert_eq!(Status::Corrupt.name(), "A2PACK_E_CORRUPT");
/// assert_eq!(Status::from_code(0), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// An operating-system I/O call failed.
    Io,
    /// A file, key or entry does not exist.
    NotFound,
    /// Malformed bytes: bad magic, bad length, bad varint...
    Corrupt,
    /// A stored CRC does not match the data.
    Checksum,
    /// A version, endianness or feature this build does not read.
    Unsupported,
    /// An index or value outside its valid range.
    OutOfRange,
    /// The caller passed something invalid.
    InvalidArgument,
    /// An allocation failed.
    NoMemory,
    /// The handle was already closed or finished.
    Closed,
    /// A callback asked the operation to stop.
    Interrupted,
    /// A bounded buffer is full (non-blocking mode).
    Full,
    /// A bug in a2pack.
    Internal,
    /// A status this version of the crate does not know.
    Other(i32),
}

impl Status {
    /// The status for a C status code (`None` for `A2PACK_OK`).
    pub fn from_code(code: i32) -> Option<Status> {
        // The codes are the header's (a2pack-sys), not typed again here.
        Some(match code {
            sys::A2PACK_OK => return None,
            sys::A2PACK_E_IO => Status::Io,
            sys::A2PACK_E_NOT_FOUND => Status::NotFound,
            sys::A2PACK_E_CORRUPT => Status::Corrupt,
            sys::A2PACK_E_CHECKSUM => Status::Checksum,
            sys::A2PACK_E_UNSUPPORTED => Status::Unsupported,
            sys::A2PACK_E_OUT_OF_RANGE => Status::OutOfRange,
            sys::A2PACK_E_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::A2PACK_E_NO_MEMORY => Status::NoMemory,
            sys::A2PACK_E_CLOSED => Status::Closed,
            sys::A2PACK_E_INTERRUPTED => Status::Interrupted,
            sys::A2PACK_E_FULL => Status::Full,
            sys::A2PACK_E_INTERNAL => Status::Internal,
            other => Status::Other(other),
        })
    }

    /// The C status code.
    pub fn code(self) -> i32 {
        match self {
            Status::Io => sys::A2PACK_E_IO,
            Status::NotFound => sys::A2PACK_E_NOT_FOUND,
            Status::Corrupt => sys::A2PACK_E_CORRUPT,
            Status::Checksum => sys::A2PACK_E_CHECKSUM,
            Status::Unsupported => sys::A2PACK_E_UNSUPPORTED,
            Status::OutOfRange => sys::A2PACK_E_OUT_OF_RANGE,
            Status::InvalidArgument => sys::A2PACK_E_INVALID_ARGUMENT,
            Status::NoMemory => sys::A2PACK_E_NO_MEMORY,
            Status::Closed => sys::A2PACK_E_CLOSED,
            Status::Interrupted => sys::A2PACK_E_INTERRUPTED,
            Status::Full => sys::A2PACK_E_FULL,
            Status::Internal => sys::A2PACK_E_INTERNAL,
            Status::Other(code) => code,
        }
    }

    /// The library's symbolic name, e.g. `"A2PACK_E_CORRUPT"`.
    pub fn name(self) -> &'static str {
        // SAFETY: a2pack_status_name never returns NULL; static storage.
        unsafe { CStr::from_ptr(sys::a2pack_status_name(self.code())) }.to_str().unwrap_or("A2PACK_E_UNKNOWN")
    }
}

/// A failed a2pack call: its [`Status`] and the library's message.
///
/// ```
/// let err = a2pack::Run::load("/no/such/run.a2run2").unwrap_err();
/// assert_eq!(err.status(), a2pack::Status::NotFound);
/// assert!(err.message().contains("/no/such/run.a2run2"));
/// println!("{err}"); // "A2PACK_E_NOT_FOUND: ..."
/// ```
///
/// `Debug` prints the same one line as `Display`, so a `main` returning
/// `Result<(), a2pack::Error>` ends with `Error: A2PACK_E_NOT_FOUND: ...`;
/// `{:#?}` (or [`Error::details`]) prints the fields.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
    accepted: Option<usize>,
}

impl Error {
    /// An error made on the Rust side (e.g. a path holding a NUL byte).
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into(), accepted: None }
    }

    /// The status of the failed call.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The message naming what was wrong and where.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// For a batch call that takes items in order
    /// ([`DataLogger::record_batch`](crate::DataLogger::record_batch)): how
    /// many were accepted before the failing one.
    pub fn accepted(&self) -> Option<usize> {
        self.accepted
    }

    /// The status, message and accepted count as a struct whose `Debug`
    /// prints each field (`Error`'s own `Debug` prints one line).
    pub fn details(&self) -> ErrorDetails<'_> {
        ErrorDetails(self)
    }

    pub(crate) fn with_accepted(mut self, n: usize) -> Error {
        self.accepted = Some(n);
        self
    }

    /// The error of the last failed call on this thread, for `code`.
    pub(crate) fn last(code: i32) -> Error {
        // SAFETY: a thread-local NUL-terminated string, read at once.
        let message = unsafe { CStr::from_ptr(sys::a2pack_last_error()) }.to_string_lossy().into_owned();
        let status = Status::from_code(code).unwrap_or(Status::Internal);
        Error { status, message, accepted: None }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            f.write_str(self.status.name())
        } else {
            write!(f, "{}: {}", self.status.name(), self.message)
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            fmt::Debug::fmt(&self.details(), f)
        } else {
            fmt::Display::fmt(self, f)
        }
    }
}

/// The fields of an [`Error`], for `{:?}`: [`Error::details`].
///
/// ```
/// let err = a2pack::Error::new(a2pack::Status::Corrupt, "bad magic");
/// assert_eq!(format!("{err:?}"), "A2PACK_E_CORRUPT: bad magic");
/// assert_eq!(format!("{:?}", err.details()), r#"Error { status: Corrupt, message: "bad magic", accepted: None }"#);
/// ```
pub struct ErrorDetails<'a>(&'a Error);

impl fmt::Debug for ErrorDetails<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("status", &self.0.status)
            .field("message", &self.0.message)
            .field("accepted", &self.0.accepted)
            .finish()
    }
}

impl std::error::Error for Error {}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// `Ok(())` for `A2PACK_OK`, otherwise the thread's last error.
pub(crate) fn check(code: sys::a2pack_status) -> Result<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(Error::last(code))
    }
}

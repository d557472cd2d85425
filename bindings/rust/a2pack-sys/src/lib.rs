//! Raw FFI bindings to liba2pack: every `a2pack_*` function, type and
//! `A2PACK_*` constant of `include/a2pack.h`.
//!
//! The bindings ship with the crate (`src/bindings.rs`, generated from the
//! header by `gen_bindings.py`, which the repository's tests rerun to check
//! it is current), so building needs no libclang. Compile-time assertions in
//! that file check every struct's size, alignment and field offsets, and
//! every scalar type's size, against the C compiler's. The `bindgen` feature
//! generates the same items with bindgen when the crate is built instead.
//!
//! Everything here is `unsafe` and follows the C header's rules (ownership,
//! views, thread safety); the `a2pack` crate is the safe interface over it.
//!
//! ```
//! let version = unsafe { std::ffi::CStr::from_ptr(a2pack_sys::a2pack_version()) };
//! assert!(!version.to_bytes().is_empty());
//! assert_eq!(unsafe { a2pack_sys::a2pack_abi_version() }, a2pack_sys::A2PACK_ABI_VERSION as u32);
//! assert!(!a2pack_sys::LIBRARY_SOURCE.is_empty());
//! ```
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case)]
#![allow(clippy::all)]
#![allow(rustdoc::all)]

#[cfg(not(feature = "bindgen"))]
include!("bindings.rs");
#[cfg(feature = "bindgen")]
include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

/// Which liba2pack the build linked and how: an installed one found with
/// pkg-config, the bundled build (with the folder it was built from), or
/// `A2PACK_SYS_LIB_DIR`'s; statically or as a shared library.
pub const LIBRARY_SOURCE: &str = env!("A2PACK_SYS_LIBRARY_SOURCE");

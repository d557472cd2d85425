//! Finds or builds liba2pack and generates the raw bindings from a2pack.h.
//!
//! Two ways to get the library:
//! - feature `bundled` (default) inside an a2pack checkout: build the shared
//!   library from the checkout's sources with CMake, in a build folder of its
//!   own under cargo's target directory (tests, benchmarks and the CLI off);
//! - otherwise: the installed library, found with pkg-config (`a2pack.pc`);
//! - or, with A2PACK_SYS_LIB_DIR set, the library in that folder (a CMake
//!   build of the checkout, as `make test-rust` uses).
//!
//! The bindings are generated at build time by bindgen from the header the
//! library came with, so functions added to the header appear here without
//! any edit.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=A2PACK_SOURCE_DIR");
    println!("cargo:rerun-if-env-changed=A2PACK_SYS_USE_PKG_CONFIG");
    println!("cargo:rerun-if-env-changed=A2PACK_SYS_LIB_DIR");
    println!("cargo:rerun-if-env-changed=A2PACK_SYS_INCLUDE_DIR");
    let (include_dir, lib_dir) = if let Some(dir) = env::var_os("A2PACK_SYS_LIB_DIR") {
        use_built(PathBuf::from(dir))
    } else {
        match bundled_source() {
            Some(root) => build_bundled(&root),
            None => probe_installed(),
        }
    };
    if let Some(dir) = &lib_dir {
        // Seen by the build scripts of crates that depend on this one as
        // DEP_A2PACK_LIB_DIR (for an rpath, say).
        println!("cargo:lib_dir={}", dir.display());
    }
    println!("cargo:include={}", include_dir.display());
    generate(&include_dir);
}

/// The checkout to build from, when the `bundled` feature is on and the
/// sources are there (A2PACK_SOURCE_DIR, or the repository this crate sits
/// in). A2PACK_SYS_USE_PKG_CONFIG=1 forces the installed library.
fn bundled_source() -> Option<PathBuf> {
    if !cfg!(feature = "bundled") || env::var_os("A2PACK_SYS_USE_PKG_CONFIG").is_some() {
        return None;
    }
    let root = match env::var_os("A2PACK_SOURCE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.."),
    };
    let is_checkout = root.join("CMakeLists.txt").is_file() && root.join("include/a2pack.h").is_file();
    is_checkout.then(|| root.canonicalize().unwrap_or(root))
}

#[cfg(feature = "bundled")]
fn build_bundled(root: &Path) -> (PathBuf, Option<PathBuf>) {
    for watched in ["CMakeLists.txt", "cmake", "include", "src"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let mut cfg = cmake::Config::new(root);
    // One build folder for every profile and for clippy/doc runs (cargo
    // gives each its own OUT_DIR): target/a2pack-cmake. The library is
    // built the same way for all of them, so it is built once.
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    if let Some(target) = out_dir.ancestors().nth(4) {
        cfg.out_dir(target.join("a2pack-cmake"));
    }
    // The library is always an optimised build, whatever cargo's profile:
    // benchmarks and tests then measure and exercise what users get. The
    // flags are CMake's own (no_default_flags), so the compiles are the
    // same as a plain `cmake -DCMAKE_BUILD_TYPE=Release` build and ccache
    // shares them.
    cfg.profile("Release")
        .no_default_flags(true)
        .define("A2PACK_BUILD_TESTS", "OFF")
        .define("A2PACK_BUILD_BENCH", "OFF")
        .define("A2PACK_BUILD_CLI", "OFF")
        .build_target("a2pack");
    if env::var_os("CMAKE_GENERATOR").is_none() && which("ninja") {
        cfg.generator("Ninja");
    }
    if which("ccache") {
        cfg.define("CMAKE_C_COMPILER_LAUNCHER", "ccache").define("CMAKE_CXX_COMPILER_LAUNCHER", "ccache");
    }
    let out = cfg.build();
    let lib_dir = out.join("build");
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rustc-link-lib=dylib=a2pack");
    // This crate's own tests and doctests run the library from there.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    (root.join("include"), Some(lib_dir))
}

#[cfg(not(feature = "bundled"))]
fn build_bundled(_root: &Path) -> (PathBuf, Option<PathBuf>) {
    unreachable!("bundled_source() is None without the feature")
}

/// A library built elsewhere (A2PACK_SYS_LIB_DIR, the folder holding
/// liba2pack.so, e.g. the checkout's own CMake build that `make test` made):
/// no second build. The header is A2PACK_SYS_INCLUDE_DIR's, else the
/// checkout's.
fn use_built(lib_dir: PathBuf) -> (PathBuf, Option<PathBuf>) {
    assert!(
        lib_dir.join("liba2pack.so").exists(),
        "a2pack-sys: A2PACK_SYS_LIB_DIR={} holds no liba2pack.so",
        lib_dir.display()
    );
    let include = match env::var_os("A2PACK_SYS_INCLUDE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../include"),
    };
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rustc-link-lib=dylib=a2pack");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    (include.canonicalize().unwrap_or(include), Some(lib_dir))
}

fn probe_installed() -> (PathBuf, Option<PathBuf>) {
    let lib = pkg_config::Config::new().atleast_version("0.1").probe("a2pack").unwrap_or_else(|e| {
        panic!(
            "a2pack-sys: no installed liba2pack found with pkg-config ({e}). Install it \
                 (cmake --install) and set PKG_CONFIG_PATH, or build inside an a2pack checkout \
                 with the `bundled` feature"
        )
    });
    let include = lib
        .include_paths
        .iter()
        .find(|dir| dir.join("a2pack.h").is_file())
        .cloned()
        .expect("a2pack-sys: pkg-config's include paths hold no a2pack.h");
    (include, lib.link_paths.first().cloned())
}

fn generate(include_dir: &Path) {
    let header = include_dir.join("a2pack.h");
    println!("cargo:rerun-if-changed={}", header.display());
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_arg(format!("-I{}", include_dir.display()))
        .allowlist_function("a2pack_.*")
        .allowlist_type("a2pack_.*")
        .allowlist_var("A2PACK_.*")
        // Enumerators keep their C names (A2PACK_E_CORRUPT, not
        // a2pack_status_code_A2PACK_E_CORRUPT): they are unique already.
        .prepend_enum_name(false)
        .layout_tests(true)
        .derive_default(true)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .expect("a2pack-sys: bindgen could not read a2pack.h (is libclang installed?)");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bindings.rs");
    bindings.write_to_file(&out).expect("a2pack-sys: cannot write bindings.rs");
}

fn which(program: &str) -> bool {
    env::var_os("PATH").is_some_and(|paths| env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

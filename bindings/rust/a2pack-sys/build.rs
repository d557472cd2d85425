//! Finds or builds liba2pack, links it, and generates the raw bindings from
//! a2pack.h.
//!
//! Where the library comes from:
//! - A2PACK_SYS_LIB_DIR=DIR: a library already built there (a CMake build of
//!   the checkout, as `make test-rust` uses);
//! - feature `bundled` (default) with the C++ sources at hand (the crate's
//!   `vendor/` folder in a packaged crate, or the a2pack checkout the crate
//!   sits in, or A2PACK_SOURCE_DIR): built with CMake under cargo's target
//!   directory (tests, benchmarks and the CLI off);
//! - otherwise: the installed library, found with pkg-config (`a2pack.pc`).
//!
//! How it is linked: statically (liba2pack_static.a, whose only global
//! symbols are the a2pack_* functions, plus the system libraries listed in
//! liba2pack_static.libs) whenever that archive is in the library folder —
//! always so for `bundled` — so every program that depends on this crate,
//! directly or not, runs without liba2pack.so on the loader's path. Cargo
//! passes a dependency's link arguments (an rpath) to that crate's own
//! targets only, so a shared library outside the loader's path would leave
//! dependents' programs unable to start. A2PACK_SYS_LINK=dylib links the
//! shared library instead (its folder is then this crate's targets' rpath,
//! and DEP_A2PACK_LIB_DIR for dependents' build scripts).
//!
//! Every path comes from the environment cargo gives the script when it
//! runs (never from `env!` at the script's compile time), so two checkouts
//! sharing one target directory each build their own.
//!
//! The bindings are generated at build time by bindgen from the header the
//! library came with, so functions added to the header appear here without
//! any edit.

use std::env;
use std::path::{Path, PathBuf};

/// The static archive and its list of system libraries (CMake target
/// `a2pack_static`).
const STATIC_ARCHIVE: &str = "liba2pack_static.a";
const STATIC_LIBS: &str = "liba2pack_static.libs";

fn main() {
    for var in [
        "A2PACK_SOURCE_DIR",
        "A2PACK_SYS_USE_PKG_CONFIG",
        "A2PACK_SYS_LIB_DIR",
        "A2PACK_SYS_INCLUDE_DIR",
        "A2PACK_SYS_LINK",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let (include_dir, lib_dir, pkg_config) = if let Some(dir) = env::var_os("A2PACK_SYS_LIB_DIR") {
        (built_include(&manifest_dir), PathBuf::from(dir), false)
    } else {
        match bundled_source(&manifest_dir) {
            Some(root) => {
                let lib_dir = build_bundled(&root);
                (root.join("include"), lib_dir, false)
            }
            None => {
                let (include, lib) = probe_installed();
                (include, lib, true)
            }
        }
    };
    link(&lib_dir, pkg_config);
    // Seen by the build scripts of crates that depend on this one as
    // DEP_A2PACK_LIB_DIR (the shared library's folder, for an rpath).
    println!("cargo:lib_dir={}", lib_dir.display());
    println!("cargo:include={}", include_dir.display());
    generate(&include_dir);
}

/// Link the static archive when the folder has one (and A2PACK_SYS_LINK is
/// not `dylib`), else the shared library.
fn link(lib_dir: &Path, pkg_config: bool) {
    let want = env::var("A2PACK_SYS_LINK").unwrap_or_default();
    assert!(
        matches!(want.as_str(), "" | "static" | "dylib"),
        "a2pack-sys: A2PACK_SYS_LINK={want}: expected `static` or `dylib`"
    );
    let archive = lib_dir.join(STATIC_ARCHIVE);
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    if want != "dylib" && archive.is_file() {
        println!("cargo:rerun-if-changed={}", archive.display());
        println!("cargo:rustc-link-lib=static=a2pack_static");
        let libs = lib_dir.join(STATIC_LIBS);
        println!("cargo:rerun-if-changed={}", libs.display());
        let text = std::fs::read_to_string(&libs)
            .unwrap_or_else(|e| panic!("a2pack-sys: cannot read {} beside the archive: {e}", libs.display()));
        for name in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            println!("cargo:rustc-link-lib=dylib={name}");
        }
        return;
    }
    assert!(
        want != "static",
        "a2pack-sys: A2PACK_SYS_LINK=static but {} does not exist (CMake target a2pack_static)",
        archive.display()
    );
    assert!(
        lib_dir.join("liba2pack.so").exists(),
        "a2pack-sys: {} holds neither {STATIC_ARCHIVE} nor liba2pack.so{}",
        lib_dir.display(),
        if pkg_config { " (the folder pkg-config's a2pack.pc names)" } else { "" }
    );
    println!("cargo:rerun-if-changed={}", lib_dir.join("liba2pack.so").display());
    println!("cargo:rustc-link-lib=dylib=a2pack");
    // This crate's own tests and doctests run the library from there
    // (dependents' programs do not get this: docs/rust.md).
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
}

/// The checkout to build from, when the `bundled` feature is on and the
/// sources are there: A2PACK_SOURCE_DIR, the repository this crate sits
/// in, or the crate's vendored copy (`vendor/`, made by vendor.sh before
/// packaging; a checkout's own sources win over a stale copy). A2PACK_SYS_USE_PKG_CONFIG=1 forces the installed library.
fn bundled_source(manifest_dir: &Path) -> Option<PathBuf> {
    if !cfg!(feature = "bundled") || env::var_os("A2PACK_SYS_USE_PKG_CONFIG").is_some() {
        return None;
    }
    let candidates = match env::var_os("A2PACK_SOURCE_DIR") {
        Some(dir) => vec![PathBuf::from(dir)],
        None => vec![manifest_dir.join("../../.."), manifest_dir.join("vendor")],
    };
    candidates
        .into_iter()
        .find(|root| root.join("CMakeLists.txt").is_file() && root.join("include/a2pack.h").is_file())
        .map(|root| root.canonicalize().unwrap_or(root))
}

/// The header for a library given by A2PACK_SYS_LIB_DIR:
/// A2PACK_SYS_INCLUDE_DIR, else the checkout's, else the vendored copy.
fn built_include(manifest_dir: &Path) -> PathBuf {
    let checkout = manifest_dir.join("../../../include");
    let include = match env::var_os("A2PACK_SYS_INCLUDE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None if checkout.join("a2pack.h").is_file() => checkout,
        None => manifest_dir.join("vendor/include"),
    };
    include.canonicalize().unwrap_or(include)
}

/// Build the library from `root` with CMake; returns the folder holding
/// liba2pack.so and liba2pack_static.a.
#[cfg(feature = "bundled")]
fn build_bundled(root: &Path) -> PathBuf {
    for watched in ["CMakeLists.txt", "cmake", "include", "src"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let mut cfg = cmake::Config::new(root);
    // One build folder for every profile and for clippy/doc runs (cargo
    // gives each its own OUT_DIR): target/a2pack-cmake/<source hash>. The
    // library is built the same way for all of them, so it is built once;
    // the hash of the source folder keeps two checkouts that share a
    // target directory apart (CMake refuses a build folder configured
    // from other sources).
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let build_root = match out_dir.ancestors().nth(4) {
        Some(target) => target.join("a2pack-cmake").join(source_key(root)),
        None => out_dir.clone(),
    };
    cfg.out_dir(&build_root);
    // The library is always an optimised build, whatever cargo's profile:
    // benchmarks and tests then measure and exercise what users get. The
    // flags are CMake's own (no_default_flags), so the compiles are the
    // same as a plain `cmake -DCMAKE_BUILD_TYPE=Release` build and ccache
    // shares them. fmt is used header-only so the static archive needs no
    // libfmt at run time; third-party sources are downloaded once into the
    // target directory, not into the (possibly read-only) source folder.
    cfg.profile("Release")
        .no_default_flags(true)
        .define("A2PACK_BUILD_TESTS", "OFF")
        .define("A2PACK_BUILD_BENCH", "OFF")
        .define("A2PACK_BUILD_CLI", "OFF")
        .define("A2PACK_FMT_HEADER_ONLY", "ON")
        .define("A2PACK_BUNDLED_SQLITE", "ON")
        .build_target("a2pack_static");
    println!("cargo:rerun-if-env-changed=A2PACK_DEPS_CACHE");
    if let Some(cache) = env::var_os("A2PACK_DEPS_CACHE") {
        cfg.define("A2PACK_DEPS_CACHE", cache);
    } else if !root.join(".deps").is_dir() {
        cfg.define("A2PACK_DEPS_CACHE", build_root.join("deps"));
    }
    if env::var_os("CMAKE_GENERATOR").is_none() && which("ninja") {
        cfg.generator("Ninja");
    }
    if which("ccache") {
        cfg.define("CMAKE_C_COMPILER_LAUNCHER", "ccache").define("CMAKE_CXX_COMPILER_LAUNCHER", "ccache");
    }
    cfg.build().join("build")
}

/// A short name for the source folder (FNV-1a of its path).
#[cfg(feature = "bundled")]
fn source_key(root: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let hash = root
        .as_os_str()
        .as_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("{hash:016x}")
}

#[cfg(not(feature = "bundled"))]
fn build_bundled(_root: &Path) -> PathBuf {
    unreachable!("bundled_source() is None without the feature")
}

/// The installed library (pkg-config): its header folder and libdir.
fn probe_installed() -> (PathBuf, PathBuf) {
    // cargo_metadata(false): link() decides between the archive and the
    // shared library in libdir.
    let lib =
        pkg_config::Config::new().atleast_version("0.1").cargo_metadata(false).probe("a2pack").unwrap_or_else(|e| {
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
    let lib_dir = lib
        .link_paths
        .iter()
        .find(|dir| dir.join(STATIC_ARCHIVE).is_file() || dir.join("liba2pack.so").exists())
        .cloned()
        .expect("a2pack-sys: pkg-config's library paths hold no liba2pack");
    (include, lib_dir)
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
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("bindings.rs");
    bindings.write_to_file(&out).expect("a2pack-sys: cannot write bindings.rs");
}

#[cfg(feature = "bundled")]
fn which(program: &str) -> bool {
    env::var_os("PATH").is_some_and(|paths| env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

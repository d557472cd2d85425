//! Finds or builds liba2pack and links it. The bindings are not generated
//! here: src/bindings.rs ships with the crate (made from a2pack.h by
//! gen_bindings.py), unless the `bindgen` feature asks for bindgen.
//!
//! Where the library comes from, first match wins:
//! - A2PACK_SYS_LIB_DIR=DIR: a library already built there (a CMake build of
//!   the checkout, as `make test-rust` uses);
//! - an installed liba2pack found with pkg-config (`a2pack.pc`), when its
//!   a2pack.h is the one the bindings were made from (or, with `bindgen`,
//!   any); A2PACK_SYS_USE_PKG_CONFIG=1 insists on it;
//! - feature `bundled` (default) with the C++ sources at hand (the crate's
//!   `vendor/` folder in a packaged crate, the a2pack checkout the crate sits
//!   in, or A2PACK_SOURCE_DIR): built with CMake under cargo's target
//!   directory (only the library target). A2PACK_SYS_BUNDLED=1 skips the
//!   pkg-config look-up.
//!
//! Everything the chosen way needs (CMake and its version, the C and C++
//! compilers, pkg-config, libcurl's and OpenSSL's headers; libclang for
//! `bindgen`) is checked before anything is compiled, and what is missing is
//! reported at once, with how to install it. Which library was used is
//! printed as a cargo warning and kept in `a2pack_sys::LIBRARY_SOURCE`.
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

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The static archive and its list of system libraries (CMake target
/// `a2pack_static`).
const STATIC_ARCHIVE: &str = "liba2pack_static.a";
const STATIC_LIBS: &str = "liba2pack_static.libs";
/// CMakeLists.txt's cmake_minimum_required.
const CMAKE_MIN: (u32, u32) = (3, 25);

/// Where the library comes from.
enum Library {
    /// A2PACK_SYS_LIB_DIR: built already.
    Prebuilt { lib_dir: PathBuf, include_dir: PathBuf },
    /// Found with pkg-config.
    Installed { lib_dir: PathBuf, include_dir: PathBuf, version: String },
    /// Built here from the sources at `root`.
    Bundled { root: PathBuf },
}

fn main() {
    for var in [
        "A2PACK_SOURCE_DIR",
        "A2PACK_SYS_USE_PKG_CONFIG",
        "A2PACK_SYS_BUNDLED",
        "A2PACK_SYS_LIB_DIR",
        "A2PACK_SYS_INCLUDE_DIR",
        "A2PACK_SYS_LINK",
        "CMAKE",
        "CMAKE_PREFIX_PATH",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let link_mode = env::var("A2PACK_SYS_LINK").unwrap_or_default();
    if !matches!(link_mode.as_str(), "" | "static" | "dylib") {
        fail(&format!("A2PACK_SYS_LINK={link_mode}: expected `static` or `dylib`"));
    }
    let library = choose(&manifest_dir);
    let include_dir = match &library {
        Library::Prebuilt { include_dir, .. } | Library::Installed { include_dir, .. } => include_dir.clone(),
        Library::Bundled { root } => root.join("include"),
    };
    println!("cargo:rerun-if-changed={}", include_dir.join("a2pack.h").display());
    check_header(&manifest_dir, &include_dir, &library);
    // Every prerequisite before any compile: the bundled build's tools, and
    // bindgen's libclang (generating first reads the header through it in
    // seconds, long before the C++ build would be done).
    if let Library::Bundled { .. } = library {
        check_bundled_prerequisites();
    }
    generate(&include_dir);
    // A library built elsewhere is watched, so a rebuild of it relinks; the
    // bundled one is written by this script itself (its sources are watched
    // instead: watching its output would rerun the script once more after
    // every build).
    let watch = !matches!(library, Library::Bundled { .. });
    let (lib_dir, source) = match library {
        Library::Prebuilt { lib_dir, .. } => {
            let what = format!("the library in {} (A2PACK_SYS_LIB_DIR)", lib_dir.display());
            (lib_dir, what)
        }
        Library::Installed { lib_dir, version, .. } => {
            let what = format!("the installed liba2pack {version} in {} (pkg-config)", lib_dir.display());
            (lib_dir, what)
        }
        Library::Bundled { root } => {
            let lib_dir = build_bundled(&root);
            let what = format!("the bundled liba2pack, built from {} into {}", root.display(), lib_dir.display());
            (lib_dir, what)
        }
    };
    let linked = link(&lib_dir, &link_mode, watch);
    let source = format!("{source}, linked {linked}");
    println!("cargo:warning=using {source}");
    println!("cargo:rustc-env=A2PACK_SYS_LIBRARY_SOURCE={source}");
    // Seen by the build scripts of crates that depend on this one as
    // DEP_A2PACK_LIB_DIR (the shared library's folder, for an rpath).
    println!("cargo:lib_dir={}", lib_dir.display());
    println!("cargo:include={}", include_dir.display());
}

/// Stop the build with one message (cargo shows a failed build script's
/// stderr).
fn fail(message: &str) -> ! {
    eprintln!("error: a2pack-sys: {message}");
    std::process::exit(1);
}

fn env_flag(var: &str) -> bool {
    env::var_os(var).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Decide where the library comes from (see the module comment).
fn choose(manifest_dir: &Path) -> Library {
    if let Some(dir) = env::var_os("A2PACK_SYS_LIB_DIR") {
        return Library::Prebuilt { lib_dir: PathBuf::from(dir), include_dir: built_include(manifest_dir) };
    }
    let want_installed = env_flag("A2PACK_SYS_USE_PKG_CONFIG");
    let want_bundled = env_flag("A2PACK_SYS_BUNDLED");
    if want_installed && want_bundled {
        fail("A2PACK_SYS_USE_PKG_CONFIG and A2PACK_SYS_BUNDLED are both set: set one");
    }
    let sources = bundled_source(manifest_dir);
    let no_sources = || {
        if cfg!(feature = "bundled") {
            "the C++ sources are not at hand for the `bundled` build (no vendor/ folder, no a2pack checkout \
             around the crate, no A2PACK_SOURCE_DIR)"
        } else {
            "the `bundled` feature is off"
        }
    };
    if want_bundled {
        return match sources {
            Some(root) => Library::Bundled { root },
            None => fail(&format!("A2PACK_SYS_BUNDLED is set but {}", no_sources())),
        };
    }
    let (lib_dir, include_dir, version) = match probe_installed() {
        Ok(found) => found,
        Err(why) => {
            return match sources {
                Some(root) if !want_installed => Library::Bundled { root },
                _ => fail(&format!(
                    "no liba2pack to link: none is installed ({why}){}. Install one (`cmake --install build \
                     --prefix P` in an a2pack checkout, then PKG_CONFIG_PATH=P/lib/pkgconfig), or point \
                     A2PACK_SYS_LIB_DIR at a built one",
                    if want_installed { String::new() } else { format!(", and {}", no_sources()) }
                )),
            };
        }
    };
    let Some(why) = header_mismatch(manifest_dir, &include_dir) else {
        return Library::Installed { lib_dir, include_dir, version };
    };
    let why = format!(
        "the installed liba2pack {version} in {} (pkg-config) does not match these bindings: {why}",
        lib_dir.display()
    );
    match sources {
        Some(root) if !want_installed => {
            println!("cargo:warning={why}; building the bundled copy instead");
            Library::Bundled { root }
        }
        _ => fail(&format!(
            "{why}. Install the liba2pack of this crate's version, or build with the `bindgen` feature \
             (bindings generated from the installed header){}",
            if want_installed && sources.is_some() {
                ", or unset A2PACK_SYS_USE_PKG_CONFIG to build the bundled copy"
            } else {
                ""
            }
        )),
    }
}

/// Link the static archive when the folder has one (and A2PACK_SYS_LINK is
/// not `dylib`), else the shared library. Says which. `watch`: rerun this
/// script when the files linked change.
fn link(lib_dir: &Path, want: &str, watch: bool) -> &'static str {
    let watch_file = |path: &Path| {
        if watch {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    };
    let archive = lib_dir.join(STATIC_ARCHIVE);
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    if want != "dylib" && archive.is_file() {
        watch_file(&archive);
        println!("cargo:rustc-link-lib=static=a2pack_static");
        let libs = lib_dir.join(STATIC_LIBS);
        watch_file(&libs);
        let text = std::fs::read_to_string(&libs)
            .unwrap_or_else(|e| fail(&format!("cannot read {} beside the archive: {e}", libs.display())));
        for name in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            println!("cargo:rustc-link-lib=dylib={name}");
        }
        return "statically";
    }
    if want == "static" {
        fail(&format!("A2PACK_SYS_LINK=static but {} does not exist (CMake target a2pack_static)", archive.display()));
    }
    if !lib_dir.join("liba2pack.so").exists() {
        fail(&format!("{} holds neither {STATIC_ARCHIVE} nor liba2pack.so", lib_dir.display()));
    }
    watch_file(&lib_dir.join("liba2pack.so"));
    println!("cargo:rustc-link-lib=dylib=a2pack");
    // This crate's own tests and doctests run the library from there
    // (dependents' programs do not get this: docs/rust.md).
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    "as a shared library"
}

/// The checkout to build from, when the `bundled` feature is on and the
/// sources are there: A2PACK_SOURCE_DIR, the repository this crate sits
/// in, or the crate's vendored copy (`vendor/`, made by vendor.sh before
/// packaging; a checkout's own sources win over a stale copy).
fn bundled_source(manifest_dir: &Path) -> Option<PathBuf> {
    if !cfg!(feature = "bundled") {
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

// ---------------------------------------------------------------- the header

/// C text without its comments (each becomes one space); string and
/// character literals kept. gen_bindings.py's strip_comments, byte for byte.
fn strip_comments(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        let next = text.get(i + 1).copied();
        if c == b'/' && next == Some(b'*') {
            i = text[i + 2..].windows(2).position(|w| w == b"*/").map_or(text.len(), |p| i + 2 + p + 2);
            out.push(b' ');
        } else if c == b'/' && next == Some(b'/') {
            i = text[i..].iter().position(|&b| b == b'\n').map_or(text.len(), |p| i + p);
            out.push(b' ');
        } else if c == b'"' || c == b'\'' {
            let mut j = i + 1;
            while j < text.len() && text[j] != c && text[j] != b'\n' {
                j += if text[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(text.len());
            out.extend_from_slice(&text[i..end]);
            i = end;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// FNV-1a 64 of the header without comments, each whitespace run one
/// space (gen_bindings.py's fingerprint): what the bindings depend on.
fn fingerprint(text: &[u8]) -> String {
    let stripped = strip_comments(text);
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let mut first = true;
    for word in stripped.split(|b| b" \t\n\x0c\r".contains(b)).filter(|w| !w.is_empty()) {
        let sep: &[u8] = if first { b"" } else { b" " };
        first = false;
        for &b in sep.iter().chain(word) {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// The fingerprint of the header src/bindings.rs was generated from.
fn shipped_fingerprint(manifest_dir: &Path) -> String {
    let path = manifest_dir.join("src/bindings.rs");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", path.display())));
    text.lines()
        .take(10)
        .find_map(|l| l.strip_prefix("// a2pack.h fingerprint: "))
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|| fail(&format!("{} has no `a2pack.h fingerprint` line", path.display())))
}

/// Why the header in `include_dir` is not the one the shipped bindings were
/// made from, if it is not (never, with `bindgen`: they are made from it).
fn header_mismatch(manifest_dir: &Path, include_dir: &Path) -> Option<String> {
    let header = include_dir.join("a2pack.h");
    let text = match std::fs::read(&header) {
        Ok(text) => text,
        Err(e) => return Some(format!("cannot read {}: {e}", header.display())),
    };
    if cfg!(feature = "bindgen") {
        return None;
    }
    let (have, want) = (fingerprint(&text), shipped_fingerprint(manifest_dir));
    (have != want).then(|| {
        format!(
            "{} (fingerprint {have}) is not the a2pack.h src/bindings.rs was generated from ({want})",
            header.display()
        )
    })
}

/// The header the library is built or linked with must be the bindings' one:
/// other declarations would compile and then call functions wrongly.
fn check_header(manifest_dir: &Path, include_dir: &Path, library: &Library) {
    let Some(why) = header_mismatch(manifest_dir, include_dir) else { return };
    // gen_bindings.py is in a checkout, not in a packaged crate: there the
    // checkout's own header is newer than its bindings.
    let checkout_include = manifest_dir.join("../../../include").canonicalize().ok();
    let in_checkout = manifest_dir.join("gen_bindings.py").is_file()
        && !matches!(library, Library::Installed { .. })
        && include_dir.canonicalize().ok() == checkout_include;
    fail(&if in_checkout {
        format!(
            "{why}: the header changed since the bindings were generated. Run \
             `python3 bindings/rust/a2pack-sys/gen_bindings.py` (needs pycparser and a C compiler) and commit \
             src/bindings.rs, or build with the `bindgen` feature"
        )
    } else {
        format!("{why}: use the header of this crate's version, or build with the `bindgen` feature")
    });
}

// ---------------------------------------------------------------- installed

/// The installed library (pkg-config): its libdir, header folder, version.
fn probe_installed() -> Result<(PathBuf, PathBuf, String), String> {
    // cargo_metadata(false): link() decides between the archive and the
    // shared library in libdir.
    let lib = pkg_config::Config::new()
        .atleast_version("0.1")
        .cargo_metadata(false)
        .env_metadata(true)
        .probe("a2pack")
        .map_err(|e| {
            let text = e.to_string();
            // The crate's message for a missing package is many lines; its
            // first says what happened.
            text.lines().next().unwrap_or("pkg-config failed").trim().to_owned()
        })?;
    let include =
        lib.include_paths.iter().find(|dir| dir.join("a2pack.h").is_file()).cloned().ok_or_else(|| {
            format!("pkg-config's a2pack.pc names no folder holding a2pack.h ({:?})", lib.include_paths)
        })?;
    let lib_dir = lib
        .link_paths
        .iter()
        .find(|dir| dir.join(STATIC_ARCHIVE).is_file() || dir.join("liba2pack.so").exists())
        .cloned()
        .ok_or_else(|| format!("pkg-config's a2pack.pc names no folder holding liba2pack ({:?})", lib.link_paths))?;
    // a2pack.pc is relocatable (paths relative to its folder): name the
    // folders plainly.
    let plain = |dir: PathBuf| dir.canonicalize().unwrap_or(dir);
    Ok((plain(lib_dir), plain(include), lib.version))
}

// ---------------------------------------------------------------- bundled

/// Everything the CMake build of the library needs, checked in a second or
/// two; all that is missing is reported at once.
#[cfg(feature = "bundled")]
fn check_bundled_prerequisites() {
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("prerequisites");
    std::fs::create_dir_all(&out_dir).unwrap_or_else(|e| fail(&format!("cannot create {}: {e}", out_dir.display())));
    let mut missing: Vec<(String, &str)> = Vec::new();

    let cmake = env::var_os("CMAKE").unwrap_or_else(|| "cmake".into());
    match Command::new(&cmake).arg("--version").output() {
        Err(e) => missing.push((
            format!("CMake {}.{} or newer (`{}`: {e})", CMAKE_MIN.0, CMAKE_MIN.1, Path::new(&cmake).display()),
            "cmake",
        )),
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            let version = text.split_whitespace().nth(2).unwrap_or("");
            let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
            let have = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
            if have < CMAKE_MIN {
                missing.push((
                    format!(
                        "CMake {}.{} or newer (found {version:?}; `pip install cmake` gives a current one)",
                        CMAKE_MIN.0, CMAKE_MIN.1
                    ),
                    "cmake",
                ));
            }
        }
    }
    // The compilers cmake-rs hands CMake (CC/CXX, else cc/c++).
    let c = cc::Build::new().cargo_metadata(false).try_get_compiler();
    let cxx = cc::Build::new().cpp(true).cargo_metadata(false).try_get_compiler();
    let probe = |tool: &Result<cc::Tool, cc::Error>, file: &str, source: &str, args: &[&str]| -> Result<(), String> {
        let tool = tool.as_ref().map_err(|e| e.to_string())?;
        let path = out_dir.join(file);
        std::fs::write(&path, source).map_err(|e| e.to_string())?;
        let out = tool
            .to_command()
            .args(args)
            .arg(&path)
            .output()
            .map_err(|e| format!("`{}`: {e}", tool.path().display()))?;
        if out.status.success() {
            return Ok(());
        }
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().find(|l| l.contains("error")).unwrap_or(err.lines().next().unwrap_or("")).trim();
        Err(format!("`{}`: {first}", tool.path().display()))
    };
    let c_ok = match probe(&c, "c.c", "int main(void) { return 0; }\n", &["-fsyntax-only"]) {
        Ok(()) => true,
        Err(e) => {
            missing.push((format!("a C compiler ({e})"), "gcc"));
            false
        }
    };
    if let Err(e) = probe(
        &cxx,
        "cxx20.cpp",
        "#include <version>\n#if __cplusplus < 202002L\n#error not C++20\n#endif\nint main() { return 0; }\n",
        &["-std=c++20", "-fsyntax-only"],
    ) {
        missing.push((format!("a C++20 compiler (GCC 10, clang 12 or newer; {e})"), "g++"));
    }
    // CMake's find_package(PkgConfig REQUIRED).
    let pkg_config = env::var_os("PKG_CONFIG").unwrap_or_else(|| "pkg-config".into());
    if Command::new(&pkg_config).arg("--version").output().is_err() {
        missing.push((format!("pkg-config (`{}`)", Path::new(&pkg_config).display()), "pkg-config"));
    }
    // Object storage compiles against libcurl's and OpenSSL's headers (the
    // libraries are loaded when first used); CMake's find_package looks in
    // the compiler's folders and under CMAKE_PREFIX_PATH.
    if c_ok {
        let mut args = vec!["-E".to_owned()];
        if let Some(prefixes) = env::var_os("CMAKE_PREFIX_PATH") {
            for p in env::split_paths(&prefixes) {
                args.push(format!("-I{}", p.join("include").display()));
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        for (file, source, what, package) in [
            ("curl.c", "#include <curl/curl.h>\n", "libcurl's headers (curl/curl.h)", "libcurl4-openssl-dev"),
            (
                "openssl.c",
                "#include <openssl/evp.h>\n#include <openssl/hmac.h>\n#include <openssl/pem.h>\n",
                "OpenSSL's headers (openssl/evp.h)",
                "libssl-dev",
            ),
        ] {
            if let Err(e) = probe(&c, file, source, &args) {
                missing.push((format!("{what}: {e}"), package));
            }
        }
    }
    if missing.is_empty() {
        return;
    }
    let mut msg = String::from("the bundled build of liba2pack (CMake, C++20) cannot start; missing:\n");
    for (what, _) in &missing {
        let _ = writeln!(msg, "  - {what}");
    }
    let packages: Vec<&str> = missing.iter().map(|(_, p)| *p).collect();
    let _ = write!(
        msg,
        "Install them (Debian/Ubuntu: apt-get install {}), or use an installed liba2pack \
         (pkg-config) or one built already (A2PACK_SYS_LIB_DIR): docs/rust.md",
        packages.join(" ")
    );
    fail(&msg);
}

#[cfg(not(feature = "bundled"))]
fn check_bundled_prerequisites() {
    unreachable!("bundled_source() is None without the feature")
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
    // shares them. Only the library target is built (cmake-rs passes
    // cargo's NUM_JOBS as --parallel); fmt is used header-only so the
    // static archive needs no libfmt at run time; third-party sources are
    // downloaded once into the target directory, not into the (possibly
    // read-only) source folder.
    cfg.profile("Release")
        .no_default_flags(true)
        .define("A2PACK_BUILD_TESTS", "OFF")
        .define("A2PACK_BUILD_BENCH", "OFF")
        .define("A2PACK_BUILD_CLI", "OFF")
        .define("A2PACK_PYTHON_EXTENSION", "OFF")
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

#[cfg(feature = "bundled")]
fn which(program: &str) -> bool {
    env::var_os("PATH").is_some_and(|paths| env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

// ---------------------------------------------------------------- bindgen

/// Without `bindgen`: src/bindings.rs is used as shipped.
#[cfg(not(feature = "bindgen"))]
fn generate(_include_dir: &Path) {}

/// With `bindgen`: the bindings made from the header the library came with,
/// into OUT_DIR/bindings.rs.
#[cfg(feature = "bindgen")]
fn generate(include_dir: &Path) {
    let header = include_dir.join("a2pack.h");
    let mut builder = bindgen::Builder::default()
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
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    // A libclang without its resource folder (PyPI's `libclang`, some
    // distributions' bare libclang.so) finds no <stddef.h>: the C
    // compiler's own folder of those headers is searched after clang's.
    if let Some(dir) = c_compiler_include_dir() {
        builder = builder.clang_arg(format!("-idirafter{}", dir.display()));
    }
    // bindgen panics when it cannot load libclang: that panic becomes the
    // message below (the default hook would print it with a backtrace).
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || builder.generate()));
    std::panic::set_hook(hook);
    let bindings = match result {
        Ok(Ok(bindings)) => bindings,
        Ok(Err(e)) => fail(&format!("bindgen could not read {}: {e}", header.display())),
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            fail(&format!(
                "the `bindgen` feature needs libclang, and bindgen could not load it: {text}. Install it \
                 (Debian/Ubuntu: apt-get install libclang-dev) or point LIBCLANG_PATH at the folder holding \
                 libclang.so, or build without the feature: the crate ships its bindings"
            ))
        }
    };
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("bindings.rs");
    bindings.write_to_file(&out).unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", out.display())));
}

/// The C compiler's folder of <stddef.h> and its kind (`cc
/// -print-file-name=include`), when it has one.
#[cfg(feature = "bindgen")]
fn c_compiler_include_dir() -> Option<PathBuf> {
    println!("cargo:rerun-if-env-changed=CC");
    let cc = env::var_os("CC").unwrap_or_else(|| "cc".into());
    let out = Command::new(cc).arg("-print-file-name=include").output().ok()?;
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    dir.join("stddef.h").is_file().then_some(dir)
}

//! Lets this crate's tests, examples and benchmarks find liba2pack when run
//! outside cargo too: an rpath to the library folder a2pack-sys found or
//! built, and that folder as A2PACK_LIB_DIR for the tests that hand the same
//! library to Python.

fn main() {
    if let Ok(dir) = std::env::var("DEP_A2PACK_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        println!("cargo:rustc-env=A2PACK_LIB_DIR={dir}");
    }
}

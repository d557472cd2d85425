"""The Rust crate's shipped raw bindings (bindings/rust/a2pack-sys/src/bindings.rs)
are exactly what gen_bindings.py makes of include/a2pack.h now, and the
generator sees every change of a declaration (and no change of a comment).

Needs a C compiler and pycparser, as the Python and Julia generators do; no
cargo and no libclang.
"""

import importlib.util
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
GEN = REPO / "bindings" / "rust" / "a2pack-sys" / "gen_bindings.py"
HEADER = REPO / "include" / "a2pack.h"


def gen_module():
    spec = importlib.util.spec_from_file_location("gen_bindings", GEN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check(header: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GEN), "--check", "--header", str(header)],
                          capture_output=True, text=True)


def test_shipped_bindings_are_what_the_header_gives():
    proc = check(HEADER)
    assert proc.returncode == 0, (
        "bindings.rs is stale: run `python bindings/rust/a2pack-sys/gen_bindings.py` "
        "and commit it\n" + proc.stdout[-6000:] + proc.stderr)


def test_a_new_declaration_is_drift_with_the_compilers_layout(tmp_path):
    header = tmp_path / "a2pack.h"
    header.write_text(HEADER.read_text() + (
        "typedef struct a2pack_drift_probe { uint32_t a; uint64_t b; } a2pack_drift_probe;\n"
        "int32_t a2pack_drift_probe_fill(a2pack_drift_probe *out, const char *type);\n"))
    proc = check(header)
    assert proc.returncode == 1
    assert "differs from what" in proc.stderr
    added = [l[1:] for l in proc.stdout.splitlines() if l.startswith("+") and not l.startswith("+++")]
    assert "pub struct a2pack_drift_probe {" in added
    # The offset of `b` is the compiler's (after 4 bytes of padding), and a
    # parameter named like a Rust keyword gets bindgen's trailing underscore.
    assert '    assert!(offset_of!(a2pack_drift_probe, b) == 8, "offset of a2pack_drift_probe.b");' in added
    assert '    assert!(size_of::<a2pack_drift_probe>() == 16, "size of a2pack_drift_probe");' in added
    assert ("    pub fn a2pack_drift_probe_fill(out: *mut a2pack_drift_probe, "
            "type_: *const ::core::ffi::c_char) -> i32;") in added
    # The fingerprint build.rs compares with the header it builds against.
    assert any(l.startswith("// a2pack.h fingerprint: ") for l in added)


def test_a_comment_is_no_drift(tmp_path):
    header = tmp_path / "a2pack.h"
    text = HEADER.read_text()
    first = text.index("#define A2PACK_H\n") + len("#define A2PACK_H\n")
    header.write_text(text[:first] + "/* a note the bindings need not see */\n" + text[first:]
                      + "// and one more\n")
    proc = check(header)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr


def test_fingerprint_ignores_comments_and_spacing_only():
    gen = gen_module()
    base = "int f(void); /* one */\n// two\nstruct s { int a; };\n"
    assert gen.fingerprint(base) == gen.fingerprint("int f(void);\nstruct s { int a; };")
    assert gen.fingerprint(base) == gen.fingerprint("  int  f(void);\n\n\tstruct s {\n int a; };\n")
    assert gen.fingerprint(base) != gen.fingerprint("int f(void);\nstruct s { long a; };")
    # Comment markers inside a string literal are text, not a comment.
    assert gen.strip_comments('a "/* no */" b /* yes */ c') == 'a "/* no */" b   c'
    assert gen.fingerprint('x "/* a */";') != gen.fingerprint('x "";')

"""Generate bindings/rust/a2pack-sys/src/bindings.rs from include/a2pack.h.

The header is read by bindings/header_model.py (the reading the Python and
Julia generators share), so no libclang is needed, and the file is committed:
building the crate runs no generator. It holds what bindgen would make of the
header, with bindgen's names (the `bindgen` feature of the crate generates
the same items at build time instead):

  - every #define constant and enumerator as a `pub const`; enumerators are
    typed with their enum's Rust type (`c_uint`, or `c_int` when a value is
    negative, as the C compiler chooses), enumerators of an anonymous enum
    with that integer type itself;
  - every typedef and enum type as a `pub type` alias;
  - every struct with a body as a `#[repr(C)]` struct in C field order, with
    Debug/Copy/Clone and an all-zero Default; every opaque handle as an
    unconstructible zero-sized struct used behind pointers;
  - every function in one `extern "C"` block.

Then, from a C program compiled against the header on this machine (LP64),
compile-time assertions: each struct's size, alignment and field offsets,
and the size (and, for integers, signedness) of every scalar Rust type the
file uses, against the C compiler's figures. A wrong mapping does not compile.
The program also proves the model's prototypes are the header's and its
constant values the compiler's, or the generator fails.

The file's first lines carry the header's fingerprint (FNV-1a 64 of its text
without comments, whitespace runs as one space): the crate's build script
computes the same of the header it builds against and refuses a header the
bindings were not generated from.

Usage: python gen_bindings.py [--header PATH] [--out PATH] [--check]
  --check: write nothing; exit 1 with a diff when --out differs from what
           the header gives (the drift check of the test suite).
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
import header_model as hm  # noqa: E402  (bindings/header_model.py)

DEFAULT_OUT = HERE / "src" / "bindings.rs"

FFI = "::core::ffi::"
# C base types: (Rust type, an integer of fixed signedness; plain char's is
# the platform's, and so is c_char's).
BASE: Dict[str, Tuple[str, bool]] = {
    "char": (FFI + "c_char", False), "signed char": (FFI + "c_schar", True),
    "unsigned char": (FFI + "c_uchar", True), "short": (FFI + "c_short", True),
    "unsigned short": (FFI + "c_ushort", True), "int": (FFI + "c_int", True),
    "unsigned int": (FFI + "c_uint", True), "unsigned": (FFI + "c_uint", True),
    "long": (FFI + "c_long", True), "unsigned long": (FFI + "c_ulong", True),
    "long long": (FFI + "c_longlong", True), "unsigned long long": (FFI + "c_ulonglong", True),
    "float": ("f32", False), "double": ("f64", False), "_Bool": ("bool", False), "bool": ("bool", False),
    "int8_t": ("i8", True), "uint8_t": ("u8", True), "int16_t": ("i16", True), "uint16_t": ("u16", True),
    "int32_t": ("i32", True), "uint32_t": ("u32", True), "int64_t": ("i64", True), "uint64_t": ("u64", True),
    "size_t": ("usize", True), "ssize_t": ("isize", True), "intptr_t": ("isize", True),
    "uintptr_t": ("usize", True), "ptrdiff_t": ("isize", True),
}

# Rust's keywords, strict and reserved: a C name spelled so gets a trailing
# underscore (bindgen's rule: a2pack_sql_param.type is `type_`).
RUST_KEYWORDS = {
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use",
    "where", "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final",
    "macro", "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
}


def ident(name: str) -> str:
    return name + "_" if name in RUST_KEYWORDS else name


# ---------------------------------------------------------------- the fingerprint

def strip_comments(text: str) -> str:
    """C text without its comments (a comment becomes one space); string and
    character literals are kept as they are."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        elif c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def fingerprint(text: str) -> str:
    """FNV-1a 64 of the header without comments, each whitespace run one
    space, trimmed (a2pack-sys/build.rs computes the same)."""
    norm = " ".join(strip_comments(text).split())
    h = 0xCBF29CE484222325
    for b in norm.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


# ---------------------------------------------------------------- the C side

def enum_int(values) -> Tuple[str, bool]:
    """The integer type GCC and clang give an enum with these values on the
    targets Rust's libc supports: unsigned int when none is negative, else
    int (the C program below checks the size and signedness)."""
    if any(v < 0 for _, v in values):
        return FFI + "c_int", True
    return FFI + "c_uint", True


class Figures:
    """What the C compiler says of the header (see c_program)."""

    def __init__(self, lines: List[str]):
        self.structs: Dict[str, Tuple[int, int]] = {}
        self.fields: Dict[str, List[Tuple[str, int]]] = {}
        self.types: Dict[int, Tuple[int, int]] = {}   # probe number -> (size, signed or -1)
        self.consts: Dict[str, int] = {}
        for line in lines:
            p = line.split()
            if p[0] == "S":
                self.structs[p[1]] = (int(p[2]), int(p[3]))
                self.fields[p[1]] = []
            elif p[0] == "F":
                self.fields[p[1]].append((p[2], int(p[3])))
            elif p[0] == "T":
                self.types[int(p[1])] = (int(p[2]), int(p[3]))
            elif p[0] == "K":
                self.consts[p[1]] = int(p[2])


def c_program(model: hm.Header, probes: List[Tuple[hm.CType, bool]]) -> str:
    """A C program printing, for the header's model: each struct's size and
    alignment (S) and each field's offset (F); the size and, for integers,
    signedness of each probed type (T, by number); every constant's value
    (K). Each function's prototype, as the model spells it, is checked to be
    the header's by the compiler."""
    out = ['#include "a2pack.h"', "#include <stddef.h>", "#include <stdio.h>", ""]
    for f in model.functions.values():
        fptr = hm.CType("pointer", target=hm.CType("function", target=f.result, params=f.params)).c("")
        out.append(f"_Static_assert(__builtin_types_compatible_p(__typeof__(&{f.name}), {fptr}), "
                   f'"the model spells {f.name} differently from a2pack.h");')
    out += ["", "int main(void) {"]
    for s in model.structs.values():
        if s.fields is None:
            continue
        t = s.c_type
        out.append(f'  printf("S {s.name} %zu %zu\\n", sizeof({t}), _Alignof({t}));')
        for f in s.fields:
            out.append(f'  printf("F {s.name} {f.name} %zu\\n", offsetof({t}, {f.name}));')
    for k, (ct, integer) in enumerate(probes):
        spelled = ct.c("")
        sign = f"(int)(({spelled})-1 < 0)" if integer else "-1"
        out.append(f'  printf("T {k} %zu %d\\n", sizeof({spelled}), {sign});')
    for e in model.enums:
        for n, _ in e.values:
            out.append(f'  printf("K {n} %lld\\n", (long long){n});')
    for c in model.constants:
        out.append(f'  printf("K {c.name} %lld\\n", (long long){c.name});')
    out += ["  return 0;", "}", ""]
    return "\n".join(out)


def c_figures(header: pathlib.Path, model: hm.Header, probes) -> Figures:
    with tempfile.TemporaryDirectory(prefix="a2pack-rust-") as tmp:
        src = pathlib.Path(tmp) / "figures.c"
        src.write_text(c_program(model, probes))
        exe = pathlib.Path(tmp) / "figures"
        cc = subprocess.run([hm.find_cc(), "-std=gnu11", "-Wall", "-Werror", "-I", str(header.parent),
                             "-o", str(exe), str(src)], capture_output=True, text=True)
        if cc.returncode != 0:
            raise SystemExit(f"gen_bindings: the layout program does not compile:\n{cc.stderr[-3000:]}")
        run = subprocess.run([str(exe)], check=True, capture_output=True, text=True)
    return Figures(run.stdout.splitlines())


# ---------------------------------------------------------------- the Rust side

class Writer:
    def __init__(self, header: hm.Header):
        self.h = header
        self.tag_names: Dict[str, str] = {}   # "struct X" / "enum X" -> Rust name
        self.enum_types: Dict[str, Tuple[str, bool]] = {}
        for s in header.structs.values():
            if s.tag:
                self.tag_names[f"struct {s.tag}"] = s.name
        for e in header.enums:
            if e.tag:
                self.tag_names[f"enum {e.tag}"] = e.tag
                self.enum_types[e.tag] = enum_int(e.values)
            if e.name and e.name != e.tag:
                self.enum_types[e.name] = enum_int(e.values)
        # Every scalar Rust type spelled in the file, with its C type: the
        # size and signedness assertions.
        self.probes: Dict[str, Tuple[hm.CType, bool]] = {}

    def scalar(self, t: hm.CType) -> bool:
        """An integer, floating or enum type (after typedefs)."""
        while t.kind == "name" and t.name in self.h.typedefs:
            t = self.h.typedefs[t.name].type
        return t.kind == "name" and t.name != "void" and not t.name.startswith("struct ") \
            and t.name not in self.h.structs

    def integer(self, t: hm.CType) -> bool:
        """Whether `t` is an integer type of fixed signedness (after typedefs
        and enums)."""
        while t.kind == "name" and t.name in self.h.typedefs:
            t = self.h.typedefs[t.name].type
        if t.kind != "name":
            return False
        if t.name in BASE:
            return BASE[t.name][1]
        name = t.name.removeprefix("enum ")
        return name in self.enum_types

    def rtype(self, t: hm.CType, where: str) -> str:
        """Rust type of C type `t`; `where` is "param", "result", "field" or
        "alias" (a parameter's array is a pointer to its first element)."""
        r = self._rtype(t, where)
        # Scalars are probed (their mapping is what can be wrong); pointers
        # are pointer-sized whatever they point to, and a struct has its own
        # assertions.
        if where != "pointee" and self.scalar(t):
            self.probes.setdefault(r, (t, self.integer(t)))
        return r

    def _rtype(self, t: hm.CType, where: str) -> str:
        if t.kind == "name":
            if t.name == "void":
                return "()" if where == "result" else FFI + "c_void"
            if t.name in BASE:
                return BASE[t.name][0]
            name = self.tag_names.get(t.name, t.name)
            if name.startswith(("struct ", "enum ")):
                raise SystemExit(f"gen_bindings: {t.name} is used but never declared")
            return name
        if t.kind == "pointer":
            target = t.target
            if target.kind == "function":
                params = ", ".join(f"{ident(p.name)}: {self.rtype(p.type, 'param')}" for p in target.params)
                res = self.rtype(target.target, "result")
                ret = "" if res == "()" else f" -> {res}"
                return f'::core::option::Option<unsafe extern "C" fn({params}){ret}>'
            inner = self.rtype(target, "pointee")
            return f"*{'const' if target.const else 'mut'} {inner}"
        if t.kind == "array":
            if where == "field":
                if t.length is None:
                    raise SystemExit("gen_bindings: flexible array members are not supported")
                return f"[{self.rtype(t.target, 'field')}; {t.length}]"
            return f"*{'const' if t.target.const else 'mut'} {self.rtype(t.target, 'pointee')}"
        raise SystemExit(f"gen_bindings: type kind {t.kind} not supported here")

    def body(self) -> List[str]:
        out: List[str] = []
        w = out.append
        fns: List[hm.Function] = []
        for it in self.h.items:
            if isinstance(it, hm.Constant):
                v = it.value
                ty = "u32" if 0 <= v < 2 ** 32 else "i32" if -(2 ** 31) <= v < 0 else \
                    "u64" if v >= 0 else "i64"
                w(f"pub const {it.name}: {ty} = {v};")
            elif isinstance(it, hm.Typedef):
                w("")
                w(f"/// C: `typedef {it.type.c(it.name)}`")
                w(f"pub type {it.name} = {self.rtype(it.type, 'alias')};")
            elif isinstance(it, hm.Enum):
                base, _ = enum_int(it.values)
                w("")
                if it.tag is None and it.name is None:
                    w("// C: enum { ... }")
                    for n, v in it.values:
                        w(f"pub const {n}: {base} = {v};")
                    continue
                rname = it.tag or it.name
                w(f"/// C: `{'enum ' + it.tag if it.tag else it.name}`")
                w(f"pub type {rname} = {base};")
                self.probes.setdefault(rname, (hm.CType("name", f"enum {it.tag}" if it.tag else it.name), True))
                if it.name and it.name != rname:
                    w(f"pub type {it.name} = {rname};")
                for n, v in it.values:
                    w(f"pub const {n}: {rname} = {v};")
            elif isinstance(it, hm.Struct):
                w("")
                w(f"/// C: `{it.c_type}`" + (" (opaque: used behind pointers only)" if it.fields is None else ""))
                w("#[repr(C)]")
                w("#[derive(Debug, Copy, Clone)]")
                if it.fields is None:
                    w(f"pub struct {it.name} {{")
                    w("    _unused: [u8; 0],")
                    w("}")
                    continue
                w(f"pub struct {it.name} {{")
                for f in it.fields:
                    w(f"    pub {ident(f.name)}: {self.rtype(f.type, 'field')},")
                w("}")
                w(f"impl ::core::default::Default for {it.name} {{")
                w("    fn default() -> Self {")
                w("        // All zero: what the C API's option structs start from before")
                w("        // their _init; every field is an integer, pointer or Option.")
                w("        unsafe { ::core::mem::zeroed() }")
                w("    }")
                w("}")
                if it.tag and it.name != it.tag:
                    w(f"pub type {it.tag} = {it.name};")
            elif isinstance(it, hm.Function):
                fns.append(it)
        w("")
        w('extern "C" {')
        for i, f in enumerate(fns):
            params = ", ".join(f"{ident(p.name)}: {self.rtype(p.type, 'param')}" for p in f.params)
            res = self.rtype(f.result, "result")
            ret = "" if res == "()" else f" -> {res}"
            if i:
                w("")
            w(f"    /// C: `{f.c()}`")
            w(f"    pub fn {f.name}({params}){ret};")
        w("}")
        return out

    def assertions(self, fig: Figures) -> List[str]:
        out = ["", "// ---------------------------------------------------------------- layout",
               "// The C compiler's figures on an LP64 target when this file was generated:",
               "// a Rust type or struct laid out otherwise fails to compile.",
               '#[cfg(all(unix, target_pointer_width = "64"))]',
               "const _: () = {",
               "    use ::core::mem::{align_of, offset_of, size_of};"]
        w = out.append
        for s in self.h.structs.values():
            if s.fields is None:
                continue
            if s.name not in fig.structs:
                raise SystemExit(f"gen_bindings: the C compiler printed nothing for struct {s.name}")
            size, align = fig.structs[s.name]
            w(f'    assert!(size_of::<{s.name}>() == {size}, "size of {s.name}");')
            w(f'    assert!(align_of::<{s.name}>() == {align}, "alignment of {s.name}");')
            for (cname, off), f in zip(fig.fields[s.name], s.fields):
                assert cname == f.name
                w(f'    assert!(offset_of!({s.name}, {ident(f.name)}) == {off}, '
                  f'"offset of {s.name}.{f.name}");')
        for k, (rust, (ct, integer)) in enumerate(self.probes.items()):
            size, signed = fig.types[k]
            label = ct.c("")
            w(f'    assert!(size_of::<{rust}>() == {size}, "size of {label}");')
            if integer and signed == 1:
                w(f'    assert!({rust}::MIN != 0, "{label} is signed");')
            elif integer:
                w(f'    assert!({rust}::MIN == 0, "{label} is unsigned");')
        w("};")
        return out


def generate(header: pathlib.Path) -> str:
    model = hm.parse(header)
    wr = Writer(model)
    body = wr.body()
    fig = c_figures(header, model, list(wr.probes.values()))
    for name, value in [(n, v) for e in model.enums for n, v in e.values] + \
            [(c.name, c.value) for c in model.constants]:
        if fig.consts.get(name) != value:
            raise SystemExit(f"gen_bindings: {name}: the model reads {value}, the C compiler "
                             f"{fig.consts.get(name)}")
    head = [
        "// Generated by bindings/rust/a2pack-sys/gen_bindings.py from include/a2pack.h. Do not",
        "// edit: the test suite regenerates this file and fails on any difference.",
        f"// a2pack.h fingerprint: {fingerprint(header.read_text())}",
        "//",
        "// The raw C API as bindgen would write it (the crate's `bindgen` feature makes",
        "// the same at build time), then compile-time checks of its layout.",
        "",
    ]
    return "\n".join(head + body + wr.assertions(fig)) + "\n"


def main() -> None:
    hm.main_write_or_check("gen_bindings", DEFAULT_OUT, generate)


if __name__ == "__main__":
    main()

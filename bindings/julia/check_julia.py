"""Checks of the Julia package that need no Julia (run by `make test-julia`).

  drift    LibA2Pack.jl is exactly what gen_julia.py makes of the header now.
  symbols  every symbol liba2pack.so exports (nm -D --defined-only) has exactly
           one wrapper in LibA2Pack.jl, and every wrapper @ccalls an exported
           symbol with the header's number of arguments; each argument and
           result type has the size, class (integer, real, pointer, void) and
           signedness the C compiler gives the header's prototype (which it
           first proves equal to the model's spelling).
  layout   a C program compiled against a2pack.h prints sizeof, alignment and
           every field's offset and size of each public struct, the size and
           signedness of each enum and integer typedef, each field's class
           (integer, real, pointer, record: __builtin_classify_type) and
           signedness, and the value of each
           constant; the same figures are computed here from the Julia
           definitions in LibA2Pack.jl (read as Julia text, not from the
           generator's model) by Julia's rules for isbits structs, which are
           the C rules; any difference fails.
  ccalls   the hand-written layer (every src/*.jl but LibA2Pack.jl) has no
           ccall, @ccall, cglobal or dlsym of its own, every LibA2Pack.<name>
           it uses exists there, and each call of a wrapper (or positional
           struct constructor) passes as many arguments as it takes.
  syntax   every .jl file of the package parses with the tree-sitter Julia
           grammar (when the tree-sitter-julia package is installed; `make
           test-julia` installs it): no Julia, but no unbalanced block either.

Usage: python check_julia.py --lib build/liba2pack.so [--header include/a2pack.h]
"""

from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import header_model as hm  # noqa: E402
import gen_julia  # noqa: E402

PKG = HERE / "A2Pack"
LIBJL = PKG / "src" / "LibA2Pack.jl"

# Julia's own primitive and C-alias types on its 64-bit Linux platforms
# (Base: Cint = Int32, Clong = Int64, Csize_t = UInt, Cchar = Int8 on x86_64 ...):
# name -> (size, alignment, signed).
JULIA_PRIMS = {
    "Int8": (1, 1, True), "UInt8": (1, 1, False), "Int16": (2, 2, True),
    "UInt16": (2, 2, False), "Int32": (4, 4, True), "UInt32": (4, 4, False),
    "Int64": (8, 8, True), "UInt64": (8, 8, False), "Int": (8, 8, True),
    "UInt": (8, 8, False), "Float32": (4, 4, True), "Float64": (8, 8, True),
    "Bool": (1, 1, False),
    "Cchar": (1, 1, True), "Cschar": (1, 1, True), "Cuchar": (1, 1, False),
    "Cshort": (2, 2, True), "Cushort": (2, 2, False), "Cint": (4, 4, True),
    "Cuint": (4, 4, False), "Clong": (8, 8, True), "Culong": (8, 8, False),
    "Clonglong": (8, 8, True), "Culonglong": (8, 8, False),
    "Csize_t": (8, 8, False), "Cssize_t": (8, 8, True), "Cptrdiff_t": (8, 8, True),
    "Cfloat": (4, 4, True), "Cdouble": (8, 8, True), "Cwchar_t": (4, 4, True),
    "Cstring": (8, 8, False),
}

failures: list = []

# GCC's type classes (typeclass.h), as __builtin_classify_type reports them;
# an enum is an integer to Julia.
C_CLASSES = {1: "integer", 2: "integer", 3: "integer", 4: "integer", 5: "pointer",
             6: "pointer", 8: "real", 12: "record", 13: "union"}


def fail(msg: str) -> None:
    failures.append(msg)


# ---------------------------------------------------------------- reading LibA2Pack.jl

class JuliaFile:
    """The top-level definitions of LibA2Pack.jl, read as Julia text."""

    def __init__(self, text: str):
        self.consts = {}     # name -> right-hand side text
        self.structs = {}    # name -> [(field, type text)]
        self.opaque = set()
        self.wrappers = {}   # julia function name -> (pointer slot, [arg types], return type)
        self.symbols = {}    # symbol -> slot, from SYMBOLS
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            m = re.match(r"^mutable struct (\w+) end\s*$", line)
            if m:
                self.opaque.add(m.group(1))
                i += 1
                continue
            m = re.match(r"^struct (\w+)\s*$", line)
            if m:
                fields = []
                i += 1
                while lines[i].strip() != "end":
                    fm = re.match(r'^\s+(var"\w+"|\w+)::(.+?)\s*(#.*)?$', lines[i])
                    if not fm:
                        raise SystemExit(f"check_julia: cannot read field line {lines[i]!r}")
                    fields.append((fm.group(1).removeprefix('var"').removesuffix('"'),
                                   fm.group(2)))
                    i += 1
                self.structs[m.group(1)] = fields
                i += 1
                continue
            m = re.match(r"^const (\w+) = (.+?)\s*$", line)
            if m:
                self.consts[m.group(1)] = m.group(2)
                i += 1
                continue
            m = re.match(r"^function (\w+)\((.*)\)\s*$", line)
            if m and i + 2 < len(lines) and lines[i + 2].strip() == "end":
                cm = re.match(r"^\s+@ccall \$\((\w+)\[\]\)\((.*)\)::(.+?)\s*$", lines[i + 1])
                if cm:
                    args = [a.strip() for a in _split_top(cm.group(2))] if cm.group(2) else []
                    params = [p.strip() for p in m.group(2).split(",")] if m.group(2) else []
                    types = []
                    for a, p in zip(args, params):
                        am = re.match(r"^(\w+)::(.+)$", a)
                        if not am or am.group(1) != p:
                            fail(f"LibA2Pack.jl: {m.group(1)}: argument {a!r} is not its parameter {p!r}")
                        types.append(am.group(2) if am else a)
                    if len(args) != len(params):
                        fail(f"LibA2Pack.jl: {m.group(1)} takes {len(params)} parameters "
                             f"but passes {len(args)} to C")
                    if m.group(1) in self.wrappers:
                        fail(f"LibA2Pack.jl: {m.group(1)} is defined twice")
                    self.wrappers[m.group(1)] = (cm.group(1), types, cm.group(3))
                    i += 3
                    continue
            m = re.match(r"^\s+\(:(\w+), (\w+)\),\s*$", line)
            if m:
                if m.group(1) in self.symbols:
                    fail(f"LibA2Pack.jl: SYMBOLS lists {m.group(1)} twice")
                self.symbols[m.group(1)] = m.group(2)
            i += 1
        # Any @ccall not in the one-line wrapper shape above is not checked:
        # refuse it.
        code = "\n".join(l for l in lines if not l.lstrip().startswith("#"))
        n_ccall = len(re.findall(r"@ccall|\bccall\s*\(", code))
        if n_ccall != len(self.wrappers):
            fail(f"LibA2Pack.jl: {n_ccall} ccall sites but {len(self.wrappers)} wrappers "
                 f"in the checked shape")


def _split_top(s: str) -> list:
    """Split on commas outside braces/parentheses."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "{(":
            depth += 1
        elif ch in "})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


class JuliaLayout:
    """Size, alignment and field offsets of Julia types, by Julia's rules for
    isbits types: each field at the next multiple of its alignment, the
    struct's alignment the largest of its fields', its size rounded up to
    that; NTuple{N,T} is N T's; Ptr{T} is a pointer."""

    def __init__(self, jf: JuliaFile):
        self.jf = jf

    def resolve(self, t: str, seen=()) -> str:
        t = t.strip()
        while t in self.jf.consts and t not in seen:
            seen = seen + (t,)
            t = self.jf.consts[t].strip()
        return t

    def prim(self, t: str):
        t = self.resolve(t)
        if t.startswith("Ptr{") or t == "Cstring":
            return (8, 8, False)
        return JULIA_PRIMS.get(t)

    def size_align(self, t: str):
        t = self.resolve(t)
        p = self.prim(t)
        if p:
            return p[0], p[1]
        m = re.fullmatch(r"NTuple\{(\d+),\s*(.+)\}", t)
        if m:
            sz, al = self.size_align(m.group(2))
            return int(m.group(1)) * sz, al
        if t in self.jf.structs:
            return self.struct(t)[:2]
        if t in self.jf.opaque:
            raise ValueError(f"{t} is opaque and cannot be held by value")
        raise ValueError(f"unknown Julia type {t!r}")

    def type_class(self, t: str) -> str:
        """integer, real, pointer, record or array (what __builtin_classify_type
        would say of the C field, arrays being compared by their size)."""
        t = self.resolve(t)
        if t.startswith("Ptr{") or t == "Cstring":
            return "pointer"
        if t.startswith("NTuple{"):
            return "pointer"  # a C array field decays to a pointer when classified
        if t in ("Float32", "Float64", "Cfloat", "Cdouble"):
            return "real"
        if t in JULIA_PRIMS:
            return "integer"
        if t in self.jf.structs:
            return "record"
        return "unknown"

    def struct(self, name: str):
        off, align, fields = 0, 1, []
        for fname, ftype in self.jf.structs[name]:
            sz, al = self.size_align(ftype)
            off = (off + al - 1) // al * al
            fields.append((fname, off, sz))
            off += sz
            align = max(align, al)
        size = (off + align - 1) // align * align
        return size, align, fields


# ---------------------------------------------------------------- the C side

def _scalar(t: hm.CType, model: hm.Header) -> bool:
    """An integer or floating type (after typedefs), not a pointer, array or struct."""
    while t.kind == "name" and t.name in model.typedefs:
        t = model.typedefs[t.name].type
    # (A struct typedef'd under its own tag's name, as DLPack's, stays a name.)
    return t.kind == "name" and not t.name.startswith("struct ") and t.name != "void" \
        and t.name not in model.structs


def c_figures(header: pathlib.Path, model: hm.Header, tmp: pathlib.Path) -> list:
    """Lines printed by a C program compiled against the header."""
    out = ['#include "a2pack.h"', "#include <stddef.h>", "#include <stdio.h>", "",
           "int main(void) {"]
    for s in model.structs.values():
        if s.fields is None:
            continue
        t = s.c_type
        out.append(f'  printf("S {s.name} %zu %zu\\n", sizeof({t}), _Alignof({t}));')
        for f in s.fields:
            # Scalar fields also print their signedness (an int32_t read as
            # UInt32 has the right size and the wrong values).
            sign = f'(int)((__typeof__((({t} *)0)->{f.name}))-1 < 0)' \
                if _scalar(f.type, model) else "-1"
            # The compiler's own class of the field (GCC/clang): integer,
            # enum, real, pointer (arrays decay to it), record.
            out.append(f'  printf("F {s.name} {f.name} %zu %zu %d %d\\n", offsetof({t}, {f.name}), '
                       f'sizeof((({t} *)0)->{f.name}), {sign}, '
                       f'__builtin_classify_type((({t} *)0)->{f.name}));')
    for e in model.enums:
        if e.c_type:
            out.append(f'  printf("E {e.name} %zu %d\\n", sizeof({e.c_type}), '
                       f'(int)(({e.c_type})-1 < 0));')
        for n, _ in e.values:
            out.append(f'  printf("K {n} %lld\\n", (long long){n});')
    for c in model.constants:
        out.append(f'  printf("K {c.name} %lld\\n", (long long){c.name});')
    for td in model.typedefs.values():
        if td.type.kind == "pointer":
            out.append(f'  printf("T {td.name} %zu p\\n", sizeof({td.name}));')
        else:
            out.append(f'  printf("T {td.name} %zu %d\\n", sizeof({td.name}), '
                       f'(int)(({td.name})-1 < 0));')
    # Functions: each one's prototype as the model spells it must be the
    # header's (checked by the compiler), then the size, class and signedness
    # of each parameter and of the result, from probe functions taking
    # exactly those parameters (array parameters decay as in the real call).
    probes = []
    for k, f in enumerate(model.functions.values()):
        fptr = hm.CType("pointer", target=hm.CType("function", target=f.result, params=f.params)).c("")
        probes.append(f'_Static_assert(__builtin_types_compatible_p(__typeof__(&{f.name}), {fptr}), '
                      f'"the model spells {f.name} differently from a2pack.h");')
        params = [hm.Param(f"a{i}", p.type) for i, p in enumerate(f.params)]
        sig = ", ".join(p.type.c(p.name) for p in params) or "void"
        probes.append(f"static void probe{k}({sig}) {{")
        for i, prm in enumerate(params):
            sign = f"(int)((__typeof__(a{i}))-1 < 0)" if _scalar(prm.type, model) else "-1"
            probes.append(f'  printf("P {f.name} {i} %zu %d %d\\n", sizeof(a{i}), '
                          f'__builtin_classify_type(a{i}), {sign});')
        r = f.result
        if r.kind == "name" and r.name == "void":
            probes.append(f'  printf("R {f.name} 0 0 -1\\n");')
        else:
            rt = r.c("")
            sign = f"(int)(({rt})-1 < 0)" if _scalar(r, model) else "-1"
            probes.append(f'  printf("R {f.name} %zu %d %d\\n", sizeof({rt}), '
                          f'__builtin_classify_type(({rt})0), {sign});')
        probes.append("}")
        out.append(f"  probe{k}(" + ", ".join("0" for _ in params) + ");")
    out += ["  return 0;", "}", ""]
    out[4:4] = probes
    src = tmp / "layout.c"
    src.write_text("\n".join(out))
    exe = tmp / "layout"
    cc = subprocess.run([hm.find_cc(), "-std=gnu11", "-Wall", "-Werror",
                         "-Wno-sizeof-array-argument", "-I", str(header.parent),
                         "-o", str(exe), str(src)], capture_output=True, text=True)
    if cc.returncode != 0:
        raise SystemExit(f"check_julia: the layout program does not compile:\n{cc.stderr[-3000:]}")
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()


# ---------------------------------------------------------------- checks

def check_layout(header, model, jf: JuliaFile, tmp) -> int:
    lay = JuliaLayout(jf)
    c_structs, c_fields = {}, {}
    n = n_sig = 0
    for line in c_figures(header, model, tmp):
        parts = line.split()
        kind = parts[0]
        n += 1
        if kind == "S":
            c_structs[parts[1]] = (int(parts[2]), int(parts[3]))
            c_fields[parts[1]] = []
        elif kind == "F":
            c_fields[parts[1]].append((parts[2], int(parts[3]), int(parts[4]), int(parts[5]),
                                       int(parts[6])))
        elif kind == "E" or kind == "T":
            name, size, sign = parts[1], int(parts[2]), parts[3]
            if name not in jf.consts:
                fail(f"{name}: no Julia type for this C type")
                continue
            p = lay.prim(name)
            if p is None:
                fail(f"{name}: Julia type {jf.consts[name]} is not a C scalar")
            elif p[0] != size or (sign != "p" and p[2] != (sign == "1")):
                fail(f"{name}: C has {size} bytes, {'pointer' if sign == 'p' else 'signed' if sign == '1' else 'unsigned'}; "
                     f"Julia {jf.consts[name]} has {p[0]} bytes, {'signed' if p[2] else 'unsigned'}")
        elif kind in ("P", "R"):
            fname = parts[1]
            w = jf.wrappers.get(fname)
            if w is None:
                continue  # check_symbols reports missing wrappers
            if kind == "P":
                i, size, cls, sign = int(parts[2]), int(parts[3]), int(parts[4]), int(parts[5])
                if i >= len(w[1]):
                    continue  # check_symbols reports the count
                jt, what = w[1][i], f"argument {i + 1}"
            else:
                size, cls, sign = int(parts[2]), int(parts[3]), int(parts[4])
                jt, what = w[2], "result"
            n_sig += 1
            if cls == 0:
                if lay.resolve(jt) != "Cvoid":
                    fail(f"{fname}: C result is void, Julia's {jt}")
                continue
            jclass = lay.type_class(jt)
            p = lay.prim(jt)
            if C_CLASSES.get(cls, "other") != jclass or p is None or p[0] != size:
                fail(f"{fname} {what}: C is {size} bytes of class {C_CLASSES.get(cls, cls)}, "
                     f"Julia's {jt} is {p[0] if p else '?'} bytes of class {jclass}")
            elif sign >= 0 and p[2] != bool(sign):
                fail(f"{fname} {what}: C {'signed' if sign else 'unsigned'}, Julia's {jt}")
        elif kind == "K":
            name, value = parts[1], int(parts[2])
            rhs = jf.consts.get(name)
            if rhs is None:
                fail(f"constant {name} = {value} is missing from LibA2Pack.jl")
                continue
            m = re.fullmatch(r"(?:(\w+)\()?(-?\d+)\)?", rhs)
            if not m or int(m.group(2)) != value:
                fail(f"constant {name}: C value {value}, Julia {rhs}")
            elif m.group(1):
                p = lay.prim(m.group(1))
                if p is None or not (-(2 ** (8 * p[0] - 1)) <= value < 2 ** (8 * p[0])) \
                        or (value < 0 and not p[2]):
                    fail(f"constant {name}: {value} does not fit Julia type {m.group(1)}")
    for name, (size, align) in c_structs.items():
        if name not in jf.structs:
            fail(f"struct {name}: missing from LibA2Pack.jl")
            continue
        try:
            jsize, jalign, jfields = lay.struct(name)
        except ValueError as e:
            fail(f"struct {name}: {e}")
            continue
        if [f[0] for f in jfields] != [f[0] for f in c_fields[name]]:
            fail(f"struct {name}: fields differ: C {[f[0] for f in c_fields[name]]}, "
                 f"Julia {[f[0] for f in jfields]}")
            continue
        jtypes = dict(jf.structs[name])
        for (fname, coff, csz, csign, cclass), (_, joff, jsz) in zip(c_fields[name], jfields):
            jclass = lay.type_class(jtypes[fname])
            if C_CLASSES.get(cclass, "other") != jclass:
                fail(f"struct {name}.{fname}: the C field is of class {C_CLASSES.get(cclass, cclass)}, "
                     f"Julia's {jtypes[fname]} of class {jclass}")
            if (coff, csz) != (joff, jsz):
                fail(f"struct {name}.{fname}: C offset {coff} size {csz}, "
                     f"Julia offset {joff} size {jsz}")
            p = lay.prim(jtypes[fname])
            if csign >= 0 and (p is None or p[2] != bool(csign)):
                fail(f"struct {name}.{fname}: C {'signed' if csign else 'unsigned'} scalar, "
                     f"Julia {jtypes[fname]}")
        if (size, align) != (jsize, jalign):
            fail(f"struct {name}: C sizeof {size} alignment {align}, "
                 f"Julia sizeof {jsize} alignment {jalign}")
    for name in jf.structs:
        if name not in c_structs:
            fail(f"struct {name}: in LibA2Pack.jl but not a struct of the header")
    return len(c_structs), n_sig


def check_symbols(lib: pathlib.Path, model: hm.Header, jf: JuliaFile) -> int:
    proc = subprocess.run(["nm", "-D", "--defined-only", "--format=posix", str(lib)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        fail(f"nm cannot read {lib}: {proc.stderr.strip()}")
        return 0
    nm = proc.stdout
    exported = set()
    for line in nm.splitlines():
        name = line.split()[0]
        if name in ("_init", "_fini", "__bss_start", "_edata", "_end"):
            continue  # the linker's own
        exported.add(name)
    by_symbol = {}
    for fname, (slot, types, _) in jf.wrappers.items():
        # The wrapper's pointer slot must be the one SYMBOLS resolves for the
        # symbol of the same name.
        sym = next((s for s, sl in jf.symbols.items() if sl == slot), None)
        if sym is None:
            fail(f"wrapper {fname}: its pointer {slot} is not resolved by load_library")
            continue
        if sym != fname:
            fail(f"wrapper {fname} calls the symbol {sym}")
        by_symbol.setdefault(sym, []).append(fname)
        if sym not in exported:
            fail(f"wrapper {fname}: {lib.name} exports no {sym}")
        f = model.functions.get(sym)
        if f is None:
            fail(f"wrapper {fname}: the header declares no {sym}")
        elif len(f.params) != len(types):
            fail(f"wrapper {fname}: {len(types)} arguments, the header's {sym} takes {len(f.params)}")
    for sym in sorted(exported):
        if len(by_symbol.get(sym, [])) != 1:
            fail(f"{lib.name} exports {sym}, which has {len(by_symbol.get(sym, []))} wrappers (want 1)")
    for sym in jf.symbols:
        if sym not in by_symbol:
            fail(f"SYMBOLS resolves {sym}, which no wrapper calls")
    return len(exported)


_JL_LITERAL = re.compile(r'"""(?:.|\n)*?"""|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'')


def _call_args(code: str, start: int):
    """Top-level arguments of the call whose "(" is at code[start], or None.
    String and character literals are skipped; keyword arguments after ";"
    are not counted."""
    depth, i, args, cur = 0, start, [], ""
    while i < len(code):
        lit = _JL_LITERAL.match(code, i)
        if lit:
            cur += lit.group(0)
            i = lit.end()
            continue
        ch = code[i]
        if ch in "([{":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append(cur)
                return [a for a in args if a.strip()]
        elif ch in ",;" and depth == 1:
            args.append(cur)
            cur = ""
            if ch == ";":
                return [a for a in args if a.strip()]
            i += 1
            continue
        cur += ch
        i += 1
    return None


def check_ccalls(jf: JuliaFile) -> int:
    files = [p for p in sorted((PKG / "src").rglob("*.jl")) if p.name != LIBJL.name]
    names = set(jf.wrappers) | set(jf.consts) | set(jf.structs) | jf.opaque | {
        "load_library", "library_path", "SYMBOLS"}
    used = 0
    for p in files:
        text = p.read_text()
        code = re.sub(r"#=.*?=#", "", text, flags=re.S)
        for no, line in enumerate(code.splitlines(), 1):
            line = line.split("#", 1)[0] if '"' not in line else line
            if re.search(r"@ccall|\bccall\s*\(|\bcglobal\s*\(|\bdlsym\s*\(|\bLibdl\b", line):
                fail(f"{p.relative_to(PKG)}:{no}: calls C directly ({line.strip()}); "
                     f"go through LibA2Pack")
        for m in re.finditer(r"\bLibA2Pack\.(?!jl\b)(\w+)", code):
            used += 1
            if m.group(1) not in names:
                fail(f"{p.relative_to(PKG)}: LibA2Pack.{m.group(1)} does not exist")
        for m in re.finditer(r"\bL\.(\w+)(\()?", code):
            used += 1
            name = m.group(1)
            if name not in names:
                fail(f"{p.relative_to(PKG)}: L.{name} does not exist in LibA2Pack")
                continue
            if not m.group(2):
                continue
            # A call: a wrapper takes the C function's arguments, a struct's
            # constructor one value per field.
            args = _call_args(code, m.end() - 1)
            want = len(jf.wrappers[name][1]) if name in jf.wrappers else \
                len(jf.structs[name]) if name in jf.structs else None
            if want is not None and args is not None and len(args) != want:
                line = code.count("\n", 0, m.start()) + 1
                fail(f"{p.relative_to(PKG)}:{line}: L.{name} called with {len(args)} "
                     f"arguments, it takes {want}")
    return used


def check_syntax() -> int:
    """Parse every .jl file of the package with tree-sitter's Julia grammar."""
    try:
        import tree_sitter
        import tree_sitter_julia
    except ImportError:
        print("julia checks: tree-sitter-julia not installed, syntax not checked")
        return -1
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_julia.language()))
    files = sorted(PKG.rglob("*.jl"))
    for path in files:
        src = path.read_bytes()
        stack, bad = [parser.parse(src).root_node], []
        while stack:
            n = stack.pop()
            if n.type == "ERROR" or n.is_missing:
                bad.append(n)
            stack.extend(n.children)
        if bad:
            # The smallest broken node points closest to the mistake.
            n = min(bad, key=lambda b: (b.end_byte - b.start_byte, b.start_byte))
            row, col = n.start_point
            lines = src.splitlines()
            line = lines[row].decode(errors="replace") if row < len(lines) else ""
            fail(f"{path.relative_to(PKG)}:{row + 1}:{col + 1}: Julia syntax error "
                 f"({'missing ' + n.type if n.is_missing else 'unexpected text'}): {line.strip()[:100]}")
    return len(files)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--header", default=str(hm.DEFAULT_HEADER))
    args = ap.parse_args()
    header = pathlib.Path(args.header).resolve()
    lib = pathlib.Path(args.lib).resolve()

    model = hm.parse(header)
    regenerated = gen_julia.Writer(model).emit()
    current = LIBJL.read_text()
    if regenerated != current:
        import difflib
        sys.stdout.writelines(list(difflib.unified_diff(
            current.splitlines(True), regenerated.splitlines(True),
            str(LIBJL), "regenerated"))[:80])
        fail(f"drift: {LIBJL.relative_to(HERE.parent.parent)} differs from what a2pack.h gives; "
             f"run `python bindings/julia/gen_julia.py` and commit it")
    jf = JuliaFile(current)
    with tempfile.TemporaryDirectory(prefix="a2pack-julia-") as tmp:
        n_structs, n_sig = check_layout(header, model, jf, pathlib.Path(tmp))
    n_syms = check_symbols(lib, model, jf)
    n_used = check_ccalls(jf)
    n_parsed = check_syntax()
    if failures:
        for f in failures:
            print(f"FAIL {f}")
        sys.exit(f"check_julia: {len(failures)} problem(s)")
    print(f"julia checks: LibA2Pack.jl matches a2pack.h; {n_syms} exported symbols, "
          f"{len(jf.wrappers)} wrappers with the header's argument counts and "
          f"the compiler's sizes, classes and signedness of their {n_sig} arguments and results; "
          f"{n_structs} structs laid out as C does; high-level layer: "
          f"{n_used} uses of LibA2Pack, no ccall of its own"
          + (f"; {n_parsed} .jl files parse" if n_parsed >= 0 else ""))


if __name__ == "__main__":
    main()

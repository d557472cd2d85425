"""Generate bindings/julia/A2Pack/src/LibA2Pack.jl from include/a2pack.h.

The header is read by bindings/header_model.py (the same reading the Python
binding's gen_ffi.py uses); this script only writes the model as Julia:

  - every #define constant and enumerator as a `const`, enumerators typed
    with their enum's Julia type;
  - every typedef and enum type as a `const` alias of its exact C type;
  - every struct with a body as an isbits `struct` in C field order (C and
    Julia lay out such structs the same way; check_julia.py proves it against
    the C compiler), every opaque handle as `mutable struct X end`;
  - every function as a wrapper `@ccall`ing a function pointer that
    `load_library(path)` resolves with Libdl.dlsym, so the library is opened
    by absolute path and nothing depends on the loader's search path.

Usage: python gen_julia.py [--header PATH] [--out PATH] [--check]
  --check: write nothing; exit 1 with a diff when --out differs from what
           the header gives (the drift check of `make test`).
"""

from __future__ import annotations

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import header_model as hm  # noqa: E402  (bindings/header_model.py)

DEFAULT_OUT = HERE / "A2Pack" / "src" / "LibA2Pack.jl"

# C base types and their Julia names (Base's C aliases where Julia has one).
BASE = {
    "void": "Cvoid", "char": "Cchar", "signed char": "Cschar", "unsigned char": "Cuchar",
    "short": "Cshort", "unsigned short": "Cushort", "int": "Cint", "unsigned int": "Cuint",
    "unsigned": "Cuint", "long": "Clong", "unsigned long": "Culong",
    "long long": "Clonglong", "unsigned long long": "Culonglong",
    "float": "Cfloat", "double": "Cdouble", "_Bool": "Bool", "bool": "Bool",
    "int8_t": "Int8", "uint8_t": "UInt8", "int16_t": "Int16", "uint16_t": "UInt16",
    "int32_t": "Int32", "uint32_t": "UInt32", "int64_t": "Int64", "uint64_t": "UInt64",
    "size_t": "Csize_t", "ssize_t": "Cssize_t", "intptr_t": "Int", "uintptr_t": "UInt",
    "ptrdiff_t": "Cptrdiff_t",
}

# Names Julia reserves; a parameter called so gets a trailing underscore.
JULIA_KEYWORDS = {
    "baremodule", "begin", "break", "catch", "const", "continue", "do", "else", "elseif",
    "end", "export", "false", "finally", "for", "function", "global", "if", "import",
    "let", "local", "macro", "module", "quote", "return", "struct", "true", "try",
    "using", "while", "abstract", "mutable", "primitive", "type", "where", "in", "isa",
}


def param_name(name: str) -> str:
    return name + "_" if name in JULIA_KEYWORDS else name


def field_name(name: str) -> str:
    return f'var"{name}"' if name in JULIA_KEYWORDS else name


class Writer:
    def __init__(self, header: hm.Header):
        self.h = header
        # struct tag / typedef name -> Julia name; enum tag/typedef -> Julia name
        self.tag_names = {}
        for s in header.structs.values():
            if s.tag:
                self.tag_names[f"struct {s.tag}"] = s.name
        for e in header.enums:
            if e.tag and e.name:
                self.tag_names[f"enum {e.tag}"] = e.name
        self.defined = set()  # Julia names of types emitted so far

    def jtype(self, t: hm.CType, where: str) -> str:
        """Julia type of C type `t`; `where` is "param", "result" or "field"."""
        if t.kind == "name":
            if t.name in BASE:
                return BASE[t.name]
            name = self.tag_names.get(t.name, t.name)
            if name.startswith(("struct ", "enum ")):
                raise SystemExit(f"gen_julia: {t.name} is used but never declared")
            return name
        if t.kind == "pointer":
            target = t.target
            if target.kind == "function":
                return "Ptr{Cvoid}"  # a callback: make it with @cfunction
            inner = self.jtype(target, "pointee")
            innermost = inner
            while innermost.startswith("Ptr{"):
                innermost = innermost[4:-1]
            if where == "field" and innermost not in self.defined \
                    and innermost not in BASE.values():
                # A struct field may point to a struct defined later in the
                # header; Julia needs field types defined first (a struct's
                # own name counts as defined). Same layout: a pointer.
                return "Ptr{Cvoid}"
            return f"Ptr{{{inner}}}"
        if t.kind == "array":
            if where == "field":
                if t.length is None:
                    raise SystemExit("gen_julia: flexible array members are not supported")
                return f"NTuple{{{t.length}, {self.jtype(t.target, 'field')}}}"
            # An array parameter is a pointer to its first element.
            return f"Ptr{{{self.jtype(t.target, 'pointee')}}}"
        if t.kind == "function":
            return "Ptr{Cvoid}"
        raise SystemExit(f"gen_julia: type kind {t.kind} not supported")

    @staticmethod
    def enum_base(values) -> str:
        # GCC's choice for an enum type on the platforms Julia runs on: unsigned
        # int when no enumerator is negative, otherwise int (check_julia.py
        # compares with the compiler).
        return "Cint" if any(v < 0 for _, v in values) else "Cuint"

    def emit(self) -> str:
        out = []
        w = out.append
        w("# Generated by bindings/julia/gen_julia.py from include/a2pack.h. Do not edit:")
        w("# `make test` regenerates this file and fails on any difference.")
        w("#")
        w("# One wrapper per C function, called through a function pointer that")
        w("# load_library(path) resolves in the library opened by absolute path.")
        w("# Arguments convert the way `@ccall` converts them (e.g. a String to")
        w("# Ptr{Cchar}, a Ref{T} or Vector{T} to Ptr{T}); the caller keeps them alive.")
        w("module LibA2Pack")
        w("")
        w("using Libdl")
        w("")
        fns = []
        for it in self.h.items:
            if isinstance(it, hm.Constant):
                w(f"const {it.name} = {it.value}")
            elif isinstance(it, hm.Typedef):
                w("")
                w(f"# {it.type.c(it.name)}")
                w(f"const {it.name} = {self.jtype(it.type, 'alias')}")
                self.defined.add(it.name)
            elif isinstance(it, hm.Enum):
                w("")
                if it.name is None:
                    w("# enum { ... }")
                    for n, v in it.values:
                        w(f"const {n} = Cint({v})")
                else:
                    w(f"# {it.c_type}")
                    w(f"const {it.name} = {self.enum_base(it.values)}")
                    self.defined.add(it.name)
                    for n, v in it.values:
                        w(f"const {n} = {it.name}({v})")
            elif isinstance(it, hm.Struct):
                w("")
                if it.fields is None:
                    w(f"# {it.c_type} (opaque: used through Ptr{{{it.name}}} only)")
                    w(f"mutable struct {it.name} end")
                else:
                    w(f"# {it.c_type}")
                    w(f"struct {it.name}")
                    self.defined.add(it.name)  # Julia allows Ptr{Self} fields
                    for f in it.fields:
                        w(f"    {field_name(f.name)}::{self.jtype(f.type, 'field')}  # {f.type.c(f.name)}")
                    w("end")
                self.defined.add(it.name)
            elif isinstance(it, hm.Function):
                fns.append(it)
        w("")
        w("# ---------------------------------------------------------------- functions")
        w("")
        for f in fns:
            w(f"const _fp_{f.name} = Ref{{Ptr{{Cvoid}}}}(C_NULL)")
        w("")
        w("# (symbol, pointer slot) of every function above.")
        w("const SYMBOLS = (")
        for f in fns:
            w(f"    (:{f.name}, _fp_{f.name}),")
        w(")")
        w("")
        w("const _handle = Ref{Ptr{Cvoid}}(C_NULL)")
        w("const _path = Ref{String}(\"\")")
        w("")
        w('"""')
        w("    load_library(path) -> handle")
        w("")
        w("Open liba2pack at the absolute `path` with `Libdl.dlopen` and resolve every")
        w("function; a missing symbol is an error naming it. Later calls return the")
        w("handle of the first load (one library per process).")
        w('"""')
        w("function load_library(path::AbstractString)")
        w("    _handle[] == C_NULL || return _handle[]")
        w("    isabspath(path) || throw(ArgumentError(\"liba2pack must be opened by absolute path, got $(repr(path))\"))")
        w("    h = Libdl.dlopen(path, Libdl.RTLD_NOW | Libdl.RTLD_LOCAL)")
        w("    for (name, slot) in SYMBOLS")
        w("        p = Libdl.dlsym(h, name; throw_error=false)")
        w("        p === nothing && error(\"$(path) does not export $(name): library and header differ\")")
        w("        slot[] = p")
        w("    end")
        w("    _path[] = String(path)")
        w("    _handle[] = h")
        w("    return h")
        w("end")
        w("")
        w("library_path() = _path[]")
        for f in fns:
            names = [param_name(p.name) for p in f.params]
            args = ", ".join(f"{n}::{self.jtype(p.type, 'param')}" for n, p in zip(names, f.params))
            ret = self.jtype(f.result, "result")
            w("")
            w(f"# {f.c()}")
            w(f"function {f.name}({', '.join(names)})")
            w(f"    @ccall $(_fp_{f.name}[])({args})::{ret}")
            w("end")
        w("")
        w("end # module LibA2Pack")
        return "\n".join(out) + "\n"


def generate(header: pathlib.Path) -> str:
    return Writer(hm.parse(header)).emit()


def main() -> None:
    hm.main_write_or_check("gen_julia", DEFAULT_OUT, generate)


if __name__ == "__main__":
    main()

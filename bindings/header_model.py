"""The one reading of include/a2pack.h that every binding generator shares.

Two steps, both used by the Python binding's generator (gen_ffi.py: the
preprocessed text is its cffi cdef) and by the Julia one (gen_julia.py: the
model below becomes LibA2Pack.jl):

  preprocess(header)  the header run through the C preprocessor with
                      A2PACK_CDEF defined: no system includes, no attributes,
                      only the declarations.
  parse(header)       that text parsed by pycparser (the C parser cffi itself
                      uses, so both outputs read the same declarations the
                      same way) into a small model: functions, structs,
                      enums, typedefs and integer #define constants, in
                      header order.

Nothing here knows the names of a2pack's functions: whatever the header
declares is in the model.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import sys
from typing import Callable, Dict, List, Optional, Tuple

REPO = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_HEADER = REPO / "include" / "a2pack.h"

# Types the preprocessed header uses without declaring them (they come from
# <stdint.h>/<stddef.h>, which A2PACK_CDEF leaves out). pycparser must be told
# they are type names; the model keeps their C names.
STANDARD_TYPES = {
    "int8_t": "signed char", "uint8_t": "unsigned char",
    "int16_t": "short", "uint16_t": "unsigned short",
    "int32_t": "int", "uint32_t": "unsigned int",
    "int64_t": "long long", "uint64_t": "unsigned long long",
    "size_t": "unsigned long", "ssize_t": "long",
    "intptr_t": "long", "uintptr_t": "unsigned long",
    "ptrdiff_t": "long", "bool": "_Bool",
}


def find_cc() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        sys.exit("a2pack.h: no C compiler found to preprocess the header (set CC)")
    return cc


def preprocess(header: pathlib.Path = DEFAULT_HEADER) -> str:
    """The declarations of the header, preprocessed with A2PACK_CDEF."""
    proc = subprocess.run(
        [find_cc(), "-E", "-P", "-DA2PACK_CDEF", "-nostdinc", "-x", "c", str(header)],
        check=True, capture_output=True, text=True)
    return proc.stdout


# ---------------------------------------------------------------- model

@dataclasses.dataclass
class CType:
    """A C type. kind is one of
    "name"     a named type: a base type ("uint32_t", "char", "void", "unsigned int"),
               a typedef name ("a2pack_status"), "struct X" or "enum X";
    "pointer"  pointer to `target`;
    "array"    `length` elements of `target`;
    "function" a function returning `target` with `params` (only ever
               behind a pointer: a callback)."""
    kind: str
    name: str = ""
    const: bool = False
    target: Optional["CType"] = None
    length: Optional[int] = None
    params: List["Param"] = dataclasses.field(default_factory=list)

    def c(self, declarator: str = "") -> str:
        """C spelling, e.g. CType(pointer to const char).c("path") -> "const char *path"."""
        d = declarator
        t = self
        while True:
            if t.kind == "name":
                base = ("const " if t.const else "") + t.name
                return f"{base} {d}".strip() if d else base
            if t.kind == "pointer":
                d = "*" + ("const " if t.const else "") + d
                t = t.target
            elif t.kind == "array":
                if d.startswith("*"):
                    d = f"({d})"
                d = f"{d}[{'' if t.length is None else t.length}]"
                t = t.target
            elif t.kind == "function":
                if d.startswith("*"):
                    d = f"({d})"
                args = ", ".join(p.type.c(p.name) for p in t.params) or "void"
                d = f"{d}({args})"
                t = t.target


@dataclasses.dataclass
class Param:
    name: str
    type: CType


@dataclasses.dataclass
class Function:
    name: str
    result: CType
    params: List[Param]

    def c(self) -> str:
        return CType("function", target=self.result, params=self.params).c(self.name)


@dataclasses.dataclass
class Struct:
    name: str                        # typedef name, else the tag
    tag: Optional[str]
    fields: Optional[List[Param]]    # None: opaque (declared, never defined here)
    typedef: bool = False

    @property
    def c_type(self) -> str:
        """How C code names the type."""
        return self.name if self.typedef else f"struct {self.tag}"


@dataclasses.dataclass
class Enum:
    name: Optional[str]              # typedef name, else the tag; None when anonymous
    tag: Optional[str]
    values: List[Tuple[str, int]]
    typedef: bool = False

    @property
    def c_type(self) -> Optional[str]:
        if self.name is None:
            return None
        return self.name if self.typedef else f"enum {self.tag}"


@dataclasses.dataclass
class Typedef:
    name: str
    type: CType


@dataclasses.dataclass
class Constant:
    name: str
    value: int


@dataclasses.dataclass
class Header:
    items: list                      # Function | Struct | Enum | Typedef | Constant, header order
    functions: Dict[str, Function]
    structs: Dict[str, Struct]
    enums: List[Enum]
    typedefs: Dict[str, Typedef]
    constants: List[Constant]


# ---------------------------------------------------------------- parsing

def _const_int(node, known: Dict[str, int]) -> int:
    """Value of an integer constant expression of an enumerator or array size."""
    from pycparser import c_ast
    if isinstance(node, c_ast.Constant):
        text = node.value.rstrip("uUlL")
        return int(text, 0) if not re.fullmatch(r"0[0-7]+", text) else int(text, 8)
    if isinstance(node, c_ast.ID):
        if node.name not in known:
            raise ValueError(f"a2pack.h: unknown name {node.name} in a constant expression")
        return known[node.name]
    if isinstance(node, c_ast.UnaryOp):
        v = _const_int(node.expr, known)
        return {"-": -v, "+": v, "~": ~v}[node.op]
    if isinstance(node, c_ast.BinaryOp):
        a, b = _const_int(node.left, known), _const_int(node.right, known)
        ops = {"+": a + b, "-": a - b, "*": a * b, "<<": a << b if b >= 0 else 0,
               ">>": a >> b if b >= 0 else 0, "|": a | b, "&": a & b, "^": a ^ b}
        if node.op in ops:
            return ops[node.op]
    raise ValueError(f"a2pack.h: constant expression not understood: {node!r}")


class _Reader:
    def __init__(self):
        self.items: list = []
        self.structs: Dict[str, Struct] = {}
        self.enum_values: Dict[str, int] = {}
        self.fake = set(STANDARD_TYPES)

    # -- types
    def ctype(self, node) -> CType:
        from pycparser import c_ast
        if isinstance(node, c_ast.TypeDecl):
            const = "const" in (node.quals or [])
            t = node.type
            if isinstance(t, c_ast.IdentifierType):
                return CType("name", " ".join(t.names), const)
            if isinstance(t, c_ast.Struct):
                self.struct(t, None)
                return CType("name", f"struct {t.name}", const)
            if isinstance(t, c_ast.Enum):
                self.enum(t, None)
                return CType("name", f"enum {t.name}", const)
            raise ValueError(f"a2pack.h: type not understood: {t!r}")
        if isinstance(node, c_ast.PtrDecl):
            return CType("pointer", const="const" in (node.quals or []),
                         target=self.ctype(node.type))
        if isinstance(node, c_ast.ArrayDecl):
            n = None if node.dim is None else _const_int(node.dim, self.enum_values)
            return CType("array", target=self.ctype(node.type), length=n)
        if isinstance(node, c_ast.FuncDecl):
            return CType("function", target=self.ctype(node.type), params=self.params(node))
        raise ValueError(f"a2pack.h: declarator not understood: {node!r}")

    def params(self, fdecl) -> List[Param]:
        from pycparser import c_ast
        out = []
        for i, p in enumerate(fdecl.args.params if fdecl.args else []):
            if isinstance(p, c_ast.EllipsisParam):
                raise ValueError("a2pack.h: variadic functions are not supported")
            t = self.ctype(p.type)
            if t.kind == "name" and t.name == "void" and not p.name:
                continue  # f(void)
            out.append(Param(p.name or f"arg{i + 1}", t))
        return out

    # -- tagged types
    def struct(self, node, typedef: Optional[str]) -> Struct:
        key = node.name or typedef
        s = self.structs.get(key)
        if s is None:
            s = Struct(typedef or node.name, node.name, None, typedef is not None)
            self.structs[key] = s
            self.items.append(s)
        elif typedef is not None and not s.typedef:
            s.name, s.typedef = typedef, True
        if node.decls is not None and s.fields is None:
            s.fields = [Param(d.name, self.ctype(d.type)) for d in node.decls]
            # Defined after an earlier forward declaration: move it to the
            # place of its definition, where its field types are known.
            self.items.remove(s)
            self.items.append(s)
        return s

    def enum(self, node, typedef: Optional[str]) -> Optional[Enum]:
        if node.values is None:
            return None
        values, nxt = [], 0
        for e in node.values.enumerators:
            v = nxt if e.value is None else _const_int(e.value, self.enum_values)
            values.append((e.name, v))
            self.enum_values[e.name] = v
            nxt = v + 1
        en = Enum(typedef or node.name, node.name, values, typedef is not None)
        self.items.append(en)
        return en

    # -- top level
    def decl(self, ext) -> None:
        from pycparser import c_ast
        if isinstance(ext, c_ast.Typedef):
            if ext.name in self.fake:
                return
            t = ext.type
            if isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.Struct):
                self.struct(t.type, ext.name)
            elif isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.Enum) \
                    and t.type.values is not None:
                self.enum(t.type, ext.name)
            else:
                self.items.append(Typedef(ext.name, self.ctype(t)))
            return
        if isinstance(ext, c_ast.Decl):
            t = ext.type
            if isinstance(t, c_ast.FuncDecl):
                self.items.append(Function(ext.name, self.ctype(t.type), self.params(t)))
            elif isinstance(t, c_ast.Struct):
                self.struct(t, None)
            elif isinstance(t, c_ast.Enum):
                self.enum(t, None)
            else:
                raise ValueError(f"a2pack.h: a public variable is not supported: {ext.name}")
            return
        raise ValueError(f"a2pack.h: top-level construct not understood: {ext!r}")


def _defines(header: pathlib.Path) -> List[Constant]:
    """Integer #define constants the header gives users (A2PACK_VERSION_MAJOR...):
    object-like macros named A2PACK_* whose body is one integer literal."""
    out = []
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(A2PACK_\w+)[ \t]+(-?(?:0x[0-9a-fA-F]+|\d+))[uUlL]*[ \t]*$",
                         header.read_text(), re.M):
        out.append(Constant(m.group(1), int(m.group(2), 0)))
    return out


def parse(header: pathlib.Path = DEFAULT_HEADER, text: Optional[str] = None) -> Header:
    """The header's declarations as a model (see the module docstring)."""
    from pycparser import CParser
    text = preprocess(header) if text is None else text
    prelude = "".join(f"typedef {c} {n};\n" for n, c in STANDARD_TYPES.items())
    ast = CParser().parse(prelude + text, str(header))
    r = _Reader()
    for ext in ast.ext:
        r.decl(ext)
    consts = _defines(pathlib.Path(header))
    items = consts + r.items
    return Header(
        items=items,
        functions={i.name: i for i in items if isinstance(i, Function)},
        structs={i.name: i for i in items if isinstance(i, Struct)},
        enums=[i for i in items if isinstance(i, Enum)],
        typedefs={i.name: i for i in items if isinstance(i, Typedef)},
        constants=consts,
    )


if __name__ == "__main__":
    h = parse(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_HEADER)
    for it in h.items:
        if isinstance(it, Function):
            print(it.c() + ";")
        elif isinstance(it, Struct):
            print(f"struct {it.name}: " + ("opaque" if it.fields is None else
                  "; ".join(f.type.c(f.name) for f in it.fields)))
        elif isinstance(it, Enum):
            print(f"enum {it.name}: {it.values}")
        elif isinstance(it, Typedef):
            print(f"typedef {it.type.c(it.name)};")
        else:
            print(f"#define {it.name} {it.value}")


def main_write_or_check(tool: str, default_out: pathlib.Path,
                        generate: "Callable[[pathlib.Path], str]") -> None:
    """The command line every generated layer shares: write `generate(header)`
    to --out atomically, or with --check exit non-zero with a diff when the
    committed file differs from what the header gives (the drift check)."""
    import argparse
    import difflib
    import tempfile

    ap = argparse.ArgumentParser(prog=tool)
    ap.add_argument("--header", default=str(DEFAULT_HEADER))
    ap.add_argument("--out", default=str(default_out))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = generate(pathlib.Path(args.header).resolve())
    out = pathlib.Path(args.out)
    if args.check:
        old = out.read_text() if out.exists() else ""
        if old != text:
            sys.stdout.writelines(list(difflib.unified_diff(
                old.splitlines(True), text.splitlines(True),
                str(out), f"{out} (regenerated from {args.header})"))[:400])
            rel = pathlib.Path(sys.argv[0]).resolve()
            try:
                rel = rel.relative_to(REPO)
            except ValueError:
                pass
            sys.exit(f"{tool}: {out} differs from what {args.header} gives; "
                     f"run `python {rel}` and commit the result")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, out)

"""Doxygen input filter for include/a2pack.h.

The header documents every declaration in plain C comments written for
people reading the header (`/* ... */` before a declaration, `/* ... */`
after an enumerator or field). Doxygen only reads its own comment forms, so
this filter rewrites them on the way in - the header itself stays as it is:

  - the file's opening comment becomes the @file documentation;
  - "Section: <name>" banners become member groups (@name ... @{ ... @});
  - a comment that starts a line becomes a /** doc comment for what follows;
  - a comment after code on the same line becomes a /**< trailing comment;
  - inside comments, <word> placeholders are escaped so that Doxygen does
    not take them for HTML tags.

Usage (Doxyfile): INPUT_FILTER = "python3 docs/api/header_filter.py"
"""

import re
import sys

PLACEHOLDER = re.compile(r"<(/?[A-Za-z_][A-Za-z0-9_ ]*)>")
BANNER = re.compile(r"^/\* =+\s*$")
SECTION = re.compile(r"^\s*\*\s*Section:\s*(.+?)\s*$")


def escape(text: str) -> str:
    return PLACEHOLDER.sub(r"\\<\1\\>", text).replace("@", "\\@")


def main() -> None:
    lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
    out = []
    in_comment = False
    first = True
    group_open = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if not in_comment and BANNER.match(line):
            # /* ===\n * Section: name\n * ===== */
            title = ""
            j = i + 1
            while j < len(lines) and "*/" not in lines[j]:
                m = SECTION.match(lines[j])
                if m:
                    title = m.group(1)
                j += 1
            if group_open:
                out.append("/** @} */")
            out.append(f"/** @name {escape(title)} */")
            out.append("/** @{ */")
            group_open = True
            out.extend([""] * (j - i))  # keep line numbers
            i = j + 1
            continue
        if in_comment:
            out.append(escape(line))
            if "*/" in line:
                in_comment = False
            i += 1
            continue
        stripped = line.lstrip()
        if stripped.startswith("/*"):
            indent = line[: len(line) - len(stripped)]
            opener = "/** @file a2pack.h\n *" if first else "/**"
            body = stripped[2:]
            out.append(indent + opener + escape(body))
            first = False
            in_comment = "*/" not in body
            i += 1
            continue
        m = re.match(r"^(.*?\S.*?)(\s*)/\*(.*)$", line)
        if m and not m.group(1).lstrip().startswith("#"):
            out.append(m.group(1) + m.group(2) + "/**<" + escape(m.group(3)))
            in_comment = "*/" not in m.group(3)
            i += 1
            continue
        out.append(line)
        i += 1
    if group_open:
        # Close the last group before the closing #endif / extern "C" lines.
        out.append("/** @} */")
    sys.stdout.write("\n".join(out))


if __name__ == "__main__":
    main()

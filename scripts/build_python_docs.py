"""Build the Python API reference with pdoc; fail on any pdoc warning.

pdoc reports what it cannot document (an unparsable annotation, a broken
stub) as warnings and goes on; the reference is only as good as those, so
`make docs` treats each as an error. Usage: build_python_docs.py OUT_DIR
"""

import sys
import warnings

import pdoc
import pdoc.render


def main() -> int:
    out = sys.argv[1]
    pdoc.render.configure(docformat="restructuredtext", show_source=False,
                          footer_text="a2pack Python API")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc("a2pack", "ai_2048", output_directory=__import__("pathlib").Path(out))
    problems = [w for w in caught if "pdoc" in (w.filename or "") or issubclass(w.category, UserWarning)]
    for w in problems:
        print(f"docs: {w.category.__name__}: {w.message}", file=sys.stderr)
    if problems:
        print(f"docs: {len(problems)} warning(s) from pdoc", file=sys.stderr)
        return 1
    print(f"docs: Python reference in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

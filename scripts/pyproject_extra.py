"""Print the package names of one optional-dependency group of a pyproject.toml.

Used by the Makefile to install the [test] extra into the project venv
without installing the package itself from an index: `make` builds it.
Names only (version bounds stripped), one per line, so the shell can test
each with `pip show` before installing what is missing.
"""
import re
import sys
import tomllib

path, group = sys.argv[1], sys.argv[2]
with open(path, "rb") as f:
    extras = tomllib.load(f)["project"]["optional-dependencies"]
for req in extras[group]:
    print(re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0])

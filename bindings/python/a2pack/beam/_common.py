"""What every a2pack.beam transform shares: the Beam import, counters, the
shard-spec parser of the write transforms and the bundle sizes of the reads."""

from __future__ import annotations

import os
import re
from typing import Any, Dict, Optional, Tuple, Union

try:
    import apache_beam as beam  # noqa: F401  (re-exported to the other modules)
    from apache_beam.metrics.metric import Metrics
except ImportError as e:  # pragma: no cover - exercised by the import test
    raise ImportError(
        "a2pack.beam needs Apache Beam, which is not installed: "
        "`pip install 'a2pack[beam]'` (or `pip install apache-beam`); "
        "the rest of a2pack works without it") from e

#: Namespace of every counter these transforms report.
NAMESPACE = "a2pack"


def counter(name: str) -> Metrics.DelegatingCounter:
    """A Beam counter in the a2pack namespace (records_read, bytes_read,
    records_written, bytes_written, bad_runs_skipped, runs_built, rows_built)."""
    return Metrics.counter(NAMESPACE, name)


# Sharded output names, as bagz.beam and sackli.beam spell them:
#   <dir>/<name>@<N><.ext>.<suffix>   N shards (N = 0: one file, no shard part)
#   <dir>/<name>@*<.ext>.<suffix>     as many shards as the runner chooses
#   <dir>/<name><.ext>.<suffix>@0     one file, no shard part
def parse_output_spec(file_path: Union[str, os.PathLike[str]], suffixes: Tuple[str, ...],
                      what: str) -> Tuple[str, str, int, Optional[str]]:
    """(file_path_prefix, file_name_suffix, num_shards, shard_name_template)
    for a FileBasedSink, or ValueError naming the accepted forms."""
    file_path = os.fspath(file_path)
    dirname, basename = os.path.split(file_path)
    alts = "|".join(re.escape(s) for s in suffixes)
    m = re.fullmatch(rf"(?P<name>.*)@(?P<n>[0-9]+|\*)(?P<suffix>([._].+)?\.({alts}))", basename)
    template: Optional[str] = None
    if m:
        name, suffix, n = m["name"], m["suffix"], m["n"]
        if n == "*":
            num_shards = 0          # the runner decides
        elif int(n) == 0:
            num_shards, template = 1, ""
        else:
            num_shards = int(n)
    else:
        m = re.fullmatch(rf"(?P<name>.+)(?P<suffix>\.({alts}))@0", basename)
        if not m:
            forms = "".join(f"<dirname>/<basename>@<num_shards><.optional_ext>.{s} or\n"
                            for s in suffixes)
            raise ValueError(
                f'File path "{file_path}" must be in the form:\n{forms}'
                f"<dirname>/<basename><.optional_ext>.{suffixes[0]}@0\n"
                "where <num_shards> is the number of shards or * for unspecified "
                f"number of shards. Or @0 for no sharding ({what}).")
        name, suffix, num_shards, template = m["name"], m["suffix"], 1, ""
    return os.path.join(dirname, name), suffix, num_shards, template


def records_per_bundle(desired_bytes: int, bytes_per_record: float,
                       cap: Optional[int]) -> int:
    """Records in an initial split of `desired_bytes` (the runner asks in
    bytes), at most `cap` when the caller set one to force finer splits."""
    n = max(1, int(desired_bytes // max(bytes_per_record, 1.0)))
    return min(n, cap) if cap else n


class ReopensOnWorkers:
    """Sources whose open readers stay behind when Beam pickles them to its
    workers: the attributes named in `_reopened` are sent as None and each
    worker opens them again from the paths it is given."""

    _reopened: Tuple[str, ...] = ()

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        for name in self._reopened:
            state[name] = None
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)

"""The order in which BuildDataset and WriteToPack put runs, whatever order
the runner delivers them in.

A runner hands elements to workers in any order and any grouping, so the
writes cannot follow arrival order and stay reproducible. Each element gets a
sort key instead, computed where the element is, from what travels with it:

* ``(key, run)`` elements sort by ``key`` (``ReadRunFiles``' relative paths,
  ``ReadFromPack(..., with_index=True)``'s entry indices, or the caller's);
* bare runs sort by their Beam timestamp, which ``ReadFromPack`` and
  ``ReadRunFiles`` set to the element's source position (entry index in the
  sorted packfiles, file index in the sorted folder), so the position
  survives the ``Map``/``Filter``/``Reshuffle`` steps a pipeline puts in
  between; runs with the same timestamp (a ``beam.Create``'s, which all have
  the minimum) then sort by a digest of their bytes;
* with several inputs given as a tuple, ``(a, b) | BuildDataset(...)``, the
  input's place in the tuple comes first.

The final step sorts these keys (small: no run data) and writes the runs in
that order, so the files depend only on the input.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, List, Sequence, Tuple, Union

from apache_beam import pvalue
from apache_beam.utils.timestamp import MIN_TIMESTAMP, Timestamp

from ..run import RunV2

#: Marks a key given by the caller (compared as given) and a bare run (by
#: timestamp, then digest) in a sort key, so the two kinds never compare
#: their values with each other.
KEYED, BARE = 0, 1

# (input number, KEYED, key) or (input number, BARE, timestamp in µs, digest).
SortKey = Tuple[Any, ...]


def position(micros: int) -> Timestamp:
    """The timestamp a read gives the element at source position `micros`."""
    return Timestamp(micros=micros)


def inputs(pvalueish: Any, what: str) -> List[pvalue.PCollection[Any]]:
    """The PCollections a transform was applied to: one, or a tuple/list of
    them in input order."""
    if isinstance(pvalueish, pvalue.PCollection):
        return [pvalueish]
    if isinstance(pvalueish, (tuple, list)) and pvalueish and all(
            isinstance(p, pvalue.PCollection) for p in pvalueish):
        return list(pvalueish)
    raise TypeError(f"{what} takes a PCollection or a non-empty tuple of PCollections "
                    f"(several inputs, in order), not {type(pvalueish).__name__}")


def path_key(key: Any) -> Any:
    """A relative path key compared component by component, as
    ``a2pack pack`` orders a folder (``a/x`` before ``a-b/x``); other keys
    as they are."""
    if isinstance(key, str):
        key = os.fsencode(key)
    if isinstance(key, bytes):
        return tuple(key.split(b"/"))
    return key


def run_bytes(run: Union[RunV2, bytes, bytearray, memoryview]) -> bytes:
    return run.to_bytes("v2") if isinstance(run, RunV2) else bytes(run)


def split(element: Any, timestamp: Timestamp, input_no: int, *,
          paths_by_component: bool = False) -> Tuple[SortKey, Any, bool]:
    """(sort key, run, whether the key was the caller's) of one element."""
    if isinstance(element, tuple) and len(element) == 2:
        key, run = element
        return (input_no, KEYED, path_key(key) if paths_by_component else key), run, True
    micros = int(timestamp.micros) if timestamp is not None else int(MIN_TIMESTAMP.micros)
    if isinstance(element, (str, os.PathLike)):
        tie = os.fsencode(element)   # a path: its name breaks ties
    else:
        tie = hashlib.sha256(run_bytes(element)).digest()
    return (input_no, BARE, micros, tie), element, False


def label(key: SortKey) -> str:
    """What an error message calls the run with this sort key."""
    if key[1] == KEYED:
        k = key[2]
        if isinstance(k, tuple) and all(isinstance(c, bytes) for c in k):
            k = b"/".join(k)
        text = os.fsdecode(k) if isinstance(k, bytes) and len(k) < 4096 else str(k)
    elif key[2] > MIN_TIMESTAMP.micros:
        text = f"the run at source position {key[2]}"
    else:
        text = f"the run with digest {key[3].hex()[:16]}" if len(key[3]) == 32 else \
            os.fsdecode(key[3])
    return text if key[0] == 0 else f"{text} (input {key[0]})"


def sort_keys(keys: Sequence[SortKey], what: str) -> List[int]:
    """Indices of `keys` in ascending key order; two equal caller keys are an
    error (which run goes first would be the runner's choice). Equal bare
    keys are the same bytes at the same position: either order writes the
    same file."""
    try:
        order = sorted(range(len(keys)), key=keys.__getitem__)
    except TypeError as e:
        raise TypeError(f"{what}: the runs' keys cannot be ordered ({e}); give every run a key "
                        "of one type (e.g. all ints or all bytes)") from e
    for a, b in zip(order, order[1:]):
        if keys[a] == keys[b] and keys[a][1] == KEYED:
            raise ValueError(
                f"{what}: two runs have the key {label(keys[a])}, so their order would depend "
                "on the runner; give each run its own key, or pass several inputs as a tuple "
                "((a, b) | transform) so that each input's keys stand apart")
    return order

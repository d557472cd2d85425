"""Limits on a dataset's SQL selections: a deadline, and Ctrl-C.

A filter is any SQL expression, so a query may run for very long (a
recursive CTE never ends). The library runs it with the GIL released, and
Python runs its signal handlers only between bytecodes: a Ctrl-C alone would
wait for the query to end. So the library is given a callback that it calls
about every 10 ms while the query runs. Entering Python there lets the
interpreter run its pending signal handlers; a KeyboardInterrupt (or any
exception a handler raises) then escapes the callback, which stops the query,
and is raised again once the library has returned.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Callable, Optional

from ._native import ffi, lib

_pending = threading.local()  # the exception that stopped this thread's query


def _stop(_type: Any, value: BaseException, _tb: Any) -> int:
    if getattr(_pending, "exc", None) is None:
        _pending.exc = value
    return 1  # non-zero: the library stops the query


def _go_on_py(_user: Any, _done: int, _total: int) -> int:
    # Nothing to do: being called is the point (see the module's docstring).
    return 0


_go_on = ffi.callback("int(void *, uint64_t, uint64_t)", _go_on_py, onerror=_stop)


def options(timeout: Optional[float]) -> Any:
    """An a2pack_dataset_query_options for one call."""
    o = ffi.new("a2pack_dataset_query_options *")
    lib.a2pack_dataset_query_options_init(o)
    if timeout is not None:
        t = float(timeout)
        if not (t > 0 and math.isfinite(t)):
            raise ValueError(f"timeout must be a positive number of seconds (or None), not {timeout!r}")
        o.timeout_ms = max(1, math.ceil(t * 1000))
    # Signal handlers run in the main thread only: elsewhere the callback
    # would only wait for the GIL.
    if threading.current_thread() is threading.main_thread():
        o.progress = _go_on
    return o


def run(call: Callable[[], int]) -> int:
    """call() (a library call given options() as its limits), raising again
    what stopped it from the callback."""
    _pending.exc = None
    try:
        status = call()
    finally:
        exc, _pending.exc = _pending.exc, None
    if exc is not None:
        raise exc
    return status

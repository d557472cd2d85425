"""JAX arrays over a2pack's memory are let go before the interpreter finalises.

``jnp.from_dlpack`` over a feed's column (or ``a2pack.grain.to_jax``) makes a
JAX array that uses a2pack's memory without a copy: XLA holds the DLPack
capsule, and through it the numpy array, until the JAX array goes. One still
alive at exit (a loop variable, a cycle not yet collected) is destroyed during
``Py_FinalizeEx``, where jaxlib's foreign-buffer destructor can abort the
process ("terminate called without an active exception", exit 134) while it
hands the capsule back. So, at exit and while the interpreter is whole, the
JAX arrays that view memory a2pack handed out are deleted (``Array.delete()``
frees the buffer now; the Python object stays, unusable), after a
``gc.collect()`` has freed those only cycles kept.

The handler is registered when a2pack first hands memory to a program that
has imported jax, so it runs before jax's own exit handlers (atexit runs the
newest first).
"""

from __future__ import annotations

import atexit
import gc
import sys
import threading
import weakref
from typing import Any, Callable, Iterable, List, Tuple

# Objects whose memory JAX may view: each gives its (address, bytes) spans.
_owners: "weakref.WeakKeyDictionary[Any, Callable[[Any], Iterable[Tuple[int, int]]]]" = (
    weakref.WeakKeyDictionary())
# JAX arrays a2pack made itself (to_jax), deleted whatever memory they view.
_made: "weakref.WeakSet[Any]" = weakref.WeakSet()
_lock = threading.Lock()
_registered = False


def ensure_registered() -> None:
    global _registered
    with _lock:
        if not _registered:
            atexit.register(release_at_exit)
            _registered = True


def track_owner(owner: Any, spans: Callable[[Any], Iterable[Tuple[int, int]]]) -> None:
    """At exit, delete the JAX arrays inside `spans(owner)` (while `owner`
    lives). Registers the exit handler once jax has been imported."""
    _owners[owner] = spans
    if "jax" in sys.modules:
        ensure_registered()


def track_arrays(arrays: Iterable[Any]) -> None:
    """At exit, delete these JAX arrays (made by a2pack over its memory)."""
    for a in arrays:
        try:
            _made.add(a)
        except TypeError:  # not weakly referenceable: nothing to track
            pass
    ensure_registered()


def _pointers(a: Any) -> List[int]:
    try:
        return [int(s.data.unsafe_buffer_pointer()) for s in a.addressable_shards]
    except Exception:  # deleted already, or not on a device that has pointers
        return []


def release_at_exit() -> None:
    jax = sys.modules.get("jax")
    if jax is None:
        return
    gc.collect()
    doomed = list(_made)
    spans: List[Tuple[int, int]] = []
    for owner, get in list(_owners.items()):
        try:
            spans.extend((lo, lo + n) for lo, n in get(owner))
        except Exception:  # a closed or half-made owner has nothing to say
            continue
    if spans:
        try:
            live = jax.live_arrays()
        except Exception:
            live = []
        for a in live:
            if any(lo <= p < hi for p in _pointers(a) for lo, hi in spans):
                doomed.append(a)
    for a in doomed:
        try:
            if not a.is_deleted():
                a.delete()
        except Exception:
            pass

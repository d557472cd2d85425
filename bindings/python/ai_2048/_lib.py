"""The a2pack library, loaded on first use.

`import ai_2048` must stay cheap (upstream's module imports in a few tens of
milliseconds), so nothing here touches a2pack, cffi or numpy until a function
first needs the C engine.
"""

import operator
from typing import Any, Optional

_native: Optional[Any] = None


def native() -> Any:
    """a2pack._native: `ffi`, `lib` and `check` of liba2pack."""
    global _native
    if _native is None:
        from a2pack import _native as loaded  # noqa: PLC0415 - deliberately lazy
        _native = loaded
    return _native


def u64(value: Any, what: str) -> int:
    """`value` as an unsigned 64-bit integer, refused as PyO3 refuses it
    (TypeError for what has no __index__, OverflowError outside 0..2**64-1)."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"'{type(value).__name__}' object cannot be interpreted as an integer "
                        f"({what})") from None
    if v < 0:
        raise OverflowError(f"can't convert negative int to unsigned ({what})")
    if v >> 64:
        raise OverflowError(f"int too big to convert ({what} must fit in 64 bits)")
    return v


def unsigned(value: Any, bits: int, what: str) -> int:
    """`value` as an unsigned integer of `bits` bits (PyO3's u32/u64 rules)."""
    v = u64(value, what)
    if v >> bits:
        raise OverflowError(f"out of range integral type conversion attempted ({what} must fit "
                            f"in {bits} bits)")
    return v


def f32(value: Any) -> float:
    """`value` rounded to a float32, as a Python float (upstream keeps f32)."""
    import struct  # noqa: PLC0415 - stdlib, cheap, only when needed
    return float(struct.unpack("<f", struct.pack("<f", float(value)))[0])

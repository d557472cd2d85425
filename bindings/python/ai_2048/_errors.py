"""Upstream raises RuntimeError for every serialization and pack failure
("serialization error: ...", "pack error: ..."). a2pack raises its own
classes (a2pack.Error and subclasses, which also derive from the closest
built-in: FileNotFoundError, ValueError, ...). Here each a2pack error becomes
a class deriving from both, so `except RuntimeError` (upstream code) and
`except FileNotFoundError` / `except a2pack.Error` (a2pack code) all work,
and the message still names the file, offset or index."""

from typing import Any, Callable, Dict, Type, TypeVar

_classes: Dict[type, type] = {}

T = TypeVar("T")


def _runtime_class(cls: type) -> type:
    made = _classes.get(cls)
    if made is None:
        made = type(cls.__name__, (cls, RuntimeError), {"__module__": "ai_2048"})
        _classes[cls] = made
    return made


def convert(prefix: str, exc: BaseException) -> BaseException:
    """An a2pack error as the RuntimeError upstream would raise."""
    from a2pack import errors  # noqa: PLC0415 - only reached after a2pack is loaded
    if not isinstance(exc, errors.Error):
        return exc
    cls = _runtime_class(type(exc))
    made: BaseException = cls(f"{prefix}: {exc.message}", exc.status)
    return made


def call(prefix: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """fn(*args, **kwargs), a2pack errors raised as upstream's RuntimeError."""
    from a2pack import errors  # noqa: PLC0415
    try:
        return fn(*args, **kwargs)
    except errors.Error as e:
        raise convert(prefix, e) from e


def check(prefix: str, status: int) -> None:
    """Raise for a failed a2pack_status, as upstream's RuntimeError."""
    if status != 0:
        from ._lib import native  # noqa: PLC0415
        call(prefix, native().check, status)


def error_class(cls: Type[BaseException]) -> type:
    return _runtime_class(cls)

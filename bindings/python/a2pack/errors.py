"""Exceptions raised for a2pack_status codes.

Every class carries `.status` (the C code) and `.message` (the library's
message naming the file, offset or index). They also derive from the closest
Python built-in, so `except FileNotFoundError` or `except IndexError` works.
"""

from typing import Dict, Optional, Type


class Error(Exception):
    """Base class of every a2pack error."""

    status = -12

    def __init__(self, message: str = "", status: Optional[int] = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class IoError(Error, OSError):
    status = -1

    def __init__(self, message: str = "", status: Optional[int] = None):
        Error.__init__(self, message, status)

    def __str__(self) -> str:
        return self.message


class NotFoundError(IoError, FileNotFoundError):
    status = -2


class CorruptError(Error, ValueError):
    status = -3


class ChecksumError(CorruptError):
    status = -4


class UnsupportedError(Error, ValueError):
    status = -5


class OutOfRangeError(Error, IndexError):
    status = -6


class InvalidArgumentError(Error, ValueError):
    status = -7


class NoMemoryError(Error, MemoryError):
    status = -8


class ClosedError(Error, ValueError):
    status = -9


class InterruptedError_(Error):
    status = -10


class FullError(Error):
    status = -11


class InternalError(Error):
    status = -12


_BY_STATUS: Dict[int, Type[Error]] = {cls.status: cls for cls in (
    IoError, NotFoundError, CorruptError, ChecksumError, UnsupportedError, OutOfRangeError,
    InvalidArgumentError, NoMemoryError, ClosedError, InterruptedError_, FullError,
    InternalError)}


def from_status(status: int, message: str) -> Error:
    cls = _BY_STATUS.get(status, Error)
    return cls(message, status)

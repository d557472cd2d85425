"""Type stubs of a2pack.bag: the sackli / bagz Python API on liba2pack."""

# Annotations stay unevaluated: pdoc executes this stub as a module, and
# ReaderIterator / Reader.Options name classes still being defined.
from __future__ import annotations

import enum
import itertools
import os
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, List, Optional, TypeAlias, TypeVar, Union, overload

import numpy
import numpy.typing

_T = TypeVar("_T")
_Record = Union[str, bytes]
_Path = Union[str, os.PathLike[str]]

class LimitsPlacement(enum.Enum):
    TAIL = 0
    SEPARATE = 1

class LimitsStorage(enum.Enum):
    ON_DISK = 0
    IN_MEMORY = 1

class ShardingLayout(enum.Enum):
    CONCATENATED = 0
    INTERLEAVED = 1

class AccessPattern(enum.Enum):
    SYSTEM = 0
    RANDOM = 1
    SEQUENTIAL = 2

class CachePolicy(enum.Enum):
    SYSTEM = 0
    DROP_AFTER_READ = 1
    DIRECT_IO = 2

class CompressionAutoDetect:
    def __init__(self) -> None: ...

class CompressionNone:
    def __init__(self) -> None: ...

class CompressionZstd:
    level: int
    dictionary: Union[str, bytes]
    def __init__(self, level: int = ..., dictionary: Union[str, bytes] = ...) -> None: ...

_Compression = Union[CompressionAutoDetect, CompressionNone, CompressionZstd]

class UnreferencedBytesWarning(UserWarning): ...
class InvalidSliceError(IndexError, ValueError): ...
class InvalidSliceBoundsError(InvalidSliceError, TypeError): ...

class ReaderIterator(itertools.chain[bytes]):
    def __iter__(self) -> ReaderIterator: ...
    def __next__(self) -> bytes: ...

# Reader.Options and Writer.Options are these classes under a second name,
# as in bag.py.
class _ReaderOptions:
    sharding_layout: ShardingLayout
    limits_placement: LimitsPlacement
    compression: _Compression
    limits_storage: LimitsStorage
    max_parallelism: int
    access_pattern: AccessPattern
    cache_policy: CachePolicy
    max_record_bytes: int
    strict: bool
    def __init__(
        self,
        sharding_layout: ShardingLayout = ...,
        limits_placement: LimitsPlacement = ...,
        compression: Optional[_Compression] = ...,
        limits_storage: LimitsStorage = ...,
        max_parallelism: Optional[int] = ...,
        access_pattern: AccessPattern = ...,
        cache_policy: CachePolicy = ...,
        max_record_bytes: Optional[int] = ...,
        strict: bool = ...,
    ) -> None: ...

class _WriterOptions:
    limits_placement: LimitsPlacement
    compression: _Compression
    durable: bool
    direct_io: bool
    def __init__(
        self,
        limits_placement: LimitsPlacement = ...,
        compression: Optional[_Compression] = ...,
        durable: bool = ...,
        direct_io: bool = ...,
    ) -> None: ...

class Reader(Sequence[bytes]):
    Options: TypeAlias = _ReaderOptions

    def __init__(self, file_spec: Union[_Path, Sequence[_Path]], options: Optional[Reader.Options] = ...) -> None: ...
    @property
    def options(self) -> Reader.Options: ...
    @property
    def file_spec(self) -> str: ...
    def __getstate__(self) -> tuple[object, ...]: ...
    def __setstate__(self, state: tuple[object, ...]) -> None: ...
    def approximate_bytes_per_record(self) -> float: ...
    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> Reader: ...
    def __iter__(self) -> ReaderIterator: ...
    def __reversed__(self) -> Reader: ...  # type: ignore[override]
    def __contains__(self, value: object) -> bool: ...
    def count(self, value: _Record) -> int: ...
    def index(self, value: _Record, start: int = ..., stop: Optional[int] = ...) -> int: ...
    def read(self) -> List[bytes]: ...
    def read_range(self, start: int, num_records: int) -> List[bytes]: ...
    def read_range_iter(self, start: int, num_records: int, read_ahead: Optional[int] = ...) -> ReaderIterator: ...
    def read_indices(
        self, indices: Union[slice, Sequence[int], numpy.typing.NDArray[numpy.integer[Any]]]
    ) -> List[bytes]: ...
    def read_indices_iter(self, indices: Iterable[int], read_ahead: Optional[int] = ...) -> ReaderIterator: ...

class Writer:
    Options: TypeAlias = _WriterOptions

    def __init__(self, filename: _Path, options: Optional[Writer.Options] = ...) -> None: ...
    @property
    def options(self) -> Writer.Options: ...
    def write(self, record: Union[_Record, bytearray, memoryview]) -> None: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> Writer: ...
    def __exit__(self, exc_type: object, exc_value: object, traceback: object) -> None: ...

class Index:
    def __init__(self, reader: Reader) -> None: ...
    def get(self, record: _Record) -> Optional[int]: ...
    def __contains__(self, record: _Record) -> bool: ...
    def __getitem__(self, record: _Record) -> int: ...
    def __len__(self) -> int: ...

class MultiIndex:
    def __init__(self, reader: Reader) -> None: ...
    @overload
    def get(self, record: _Record) -> Optional[List[int]]: ...
    @overload
    def get(self, record: _Record, default: _T) -> Union[List[int], _T]: ...
    def __contains__(self, record: _Record) -> bool: ...
    def __getitem__(self, record: _Record) -> List[int]: ...
    def __len__(self) -> int: ...

"""The options of bag Readers and Writers: limits, sharding, access and cache
enums, compression, and the option records mirroring sackli's (a2pack.bag).
"""

from __future__ import annotations

import enum
from typing import Optional, Union

from ._native import ffi, lib


# ---------------------------------------------------------------- options

# The values are the library's (a2pack.h), which the options send as they are.
class LimitsPlacement(enum.Enum):
    TAIL = int(lib.A2PACK_BAG_LIMITS_TAIL)
    SEPARATE = int(lib.A2PACK_BAG_LIMITS_SEPARATE)


class LimitsStorage(enum.Enum):
    ON_DISK = int(lib.A2PACK_BAG_LIMITS_ON_DISK)
    IN_MEMORY = int(lib.A2PACK_BAG_LIMITS_IN_MEMORY)


class ShardingLayout(enum.Enum):
    CONCATENATED = int(lib.A2PACK_BAG_SHARDING_CONCATENATED)
    INTERLEAVED = int(lib.A2PACK_BAG_SHARDING_INTERLEAVED)


class AccessPattern(enum.Enum):
    SYSTEM = int(lib.A2PACK_BAG_ACCESS_SYSTEM)
    RANDOM = int(lib.A2PACK_BAG_ACCESS_RANDOM)
    SEQUENTIAL = int(lib.A2PACK_BAG_ACCESS_SEQUENTIAL)


class CachePolicy(enum.Enum):
    SYSTEM = int(lib.A2PACK_BAG_CACHE_SYSTEM)
    DROP_AFTER_READ = int(lib.A2PACK_BAG_CACHE_DROP_AFTER_READ)
    DIRECT_IO = int(lib.A2PACK_BAG_CACHE_DIRECT_IO)


class _ArglessCompression:
    """A compression choice without parameters: all instances are equal."""

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))

    def __repr__(self):
        return f"{type(self).__name__}()"


class CompressionAutoDetect(_ArglessCompression):
    """Compression by extension: `.bagz` → Zstandard, anything else → none."""


class CompressionNone(_ArglessCompression):
    """Records are stored as they are."""


class CompressionZstd:
    """One Zstandard frame per record.

    Args:
      level: compression level (0 = zstd's default, 3); unused when reading.
      dictionary: a zstd dictionary (trained, or raw content), or empty for
        none. Readers must be given the same dictionary.
    """

    def __init__(self, level: int = 0, dictionary: Union[str, bytes] = ""):
        self.level = int(level)
        self.dictionary = dictionary

    def _dictionary_bytes(self) -> bytes:
        d = self.dictionary
        return d.encode("utf-8") if isinstance(d, str) else bytes(d)

    def __eq__(self, other):
        return (type(other) is CompressionZstd and self.level == other.level
                and self._dictionary_bytes() == other._dictionary_bytes())

    def __hash__(self):
        return hash((CompressionZstd, self.level, self._dictionary_bytes()))

    def __repr__(self):
        return f"CompressionZstd(level={self.level}, dictionary=<{len(self._dictionary_bytes())} bytes>)"


_Compression = Union[CompressionAutoDetect, CompressionNone, CompressionZstd]


def _compression_fields(c) -> tuple:
    """(C enum, level, dictionary bytes) of a compression option."""
    if c is None or isinstance(c, CompressionAutoDetect):
        return lib.A2PACK_BAG_COMPRESSION_AUTO, 0, b""
    if isinstance(c, CompressionNone):
        return lib.A2PACK_BAG_COMPRESSION_NONE, 0, b""
    if isinstance(c, CompressionZstd):
        return lib.A2PACK_BAG_COMPRESSION_ZSTD, c.level, c._dictionary_bytes()
    raise TypeError(f"compression must be CompressionAutoDetect, CompressionNone or "
                    f"CompressionZstd, not {type(c).__name__}")


def _enum(value, cls):
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        raise TypeError(f"expected a {cls.__name__}, got {value!r}") from None


def _default_max_record_bytes() -> int:
    """The library's default (A2PACK_BAG_DEFAULT_MAX_RECORD_BYTES, 1 GiB)."""
    o = ffi.new("a2pack_bag_reader_options *")
    lib.a2pack_bag_reader_options_init(o)
    return int(o.max_record_bytes)


class _ReaderOptions:
    """Options for creating a Reader (see the module docstring of sackli)."""

    def __init__(
        self,
        sharding_layout: ShardingLayout = ShardingLayout.CONCATENATED,
        limits_placement: LimitsPlacement = LimitsPlacement.TAIL,
        compression: _Compression = None,
        limits_storage: LimitsStorage = LimitsStorage.ON_DISK,
        max_parallelism: Optional[int] = None,
        access_pattern: AccessPattern = AccessPattern.SYSTEM,
        cache_policy: CachePolicy = CachePolicy.SYSTEM,
        max_record_bytes: Optional[int] = None,
        strict: bool = False,
    ):
        self.sharding_layout = _enum(sharding_layout, ShardingLayout)
        self.limits_placement = _enum(limits_placement, LimitsPlacement)
        self.compression = CompressionAutoDetect() if compression is None else compression
        _compression_fields(self.compression)
        self.limits_storage = _enum(limits_storage, LimitsStorage)
        self.max_parallelism = 100 if max_parallelism is None else int(max_parallelism)
        if self.max_parallelism < 1:
            raise ValueError("max_parallelism must be at least 1")
        self.access_pattern = _enum(access_pattern, AccessPattern)
        self.cache_policy = _enum(cache_policy, CachePolicy)
        # a2pack extensions: the largest decoded size of a compressed record
        # (default 1 GiB, checked before anything is allocated), and whether
        # unreferenced bytes after the last limit of a separate-limits file
        # are an error (strict) or a warning.
        self.max_record_bytes = (_default_max_record_bytes()
                                 if max_record_bytes is None else int(max_record_bytes))
        if self.max_record_bytes < 1:
            raise ValueError("max_record_bytes must be at least 1")
        self.strict = bool(strict)

    def _c_struct(self):
        o = ffi.new("a2pack_bag_reader_options *")
        lib.a2pack_bag_reader_options_init(o)
        comp, _, dictionary = _compression_fields(self.compression)
        o.compression = comp
        keep = None
        if dictionary:
            keep = ffi.from_buffer("uint8_t[]", dictionary)
            o.zstd_dictionary = keep
            o.zstd_dictionary_len = len(dictionary)
        o.limits_placement = _enum(self.limits_placement, LimitsPlacement).value
        o.limits_storage = _enum(self.limits_storage, LimitsStorage).value
        o.access_pattern = _enum(self.access_pattern, AccessPattern).value
        o.cache_policy = _enum(self.cache_policy, CachePolicy).value
        o.sharding = _enum(self.sharding_layout, ShardingLayout).value
        o.max_parallelism = int(self.max_parallelism)
        # getattr: options pickled by an older a2pack lack these.
        o.max_record_bytes = int(getattr(self, "max_record_bytes", 0) or 0)
        o.strict = 1 if getattr(self, "strict", False) else 0
        return o, keep

    def __eq__(self, other):
        return type(other) is type(self) and vars(self) == vars(other)

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"Reader.Options({fields})"


class _WriterOptions:
    """Options for creating a Writer.

    Args:
      limits_placement: where the limits go at close (default TAIL).
      compression: default auto-detection by extension.
      durable: fsync the file before it is renamed into place at close (the
        default). False skips the fsync, as bagz's writer (which never
        fsyncs) does: the file still appears only once complete, but a power
        loss soon after close may lose its contents. (a2pack extension.)
      direct_io: write whole 1 MiB blocks of the file with O_DIRECT, around
        the page cache (the default, where the filesystem allows it): large
        files write faster, and the page cache stays with readers. With
        durable=False blocks go through the page cache and with O_DIRECT at
        the same time, the page cache taking them until the kernel would
        start throttling writers. False writes every byte through the page
        cache. (a2pack extension.)
    """

    def __init__(
        self,
        limits_placement: LimitsPlacement = LimitsPlacement.TAIL,
        compression: _Compression = None,
        durable: bool = True,
        direct_io: bool = True,
    ):
        self.limits_placement = _enum(limits_placement, LimitsPlacement)
        self.compression = CompressionAutoDetect() if compression is None else compression
        _compression_fields(self.compression)
        self.durable = bool(durable)
        self.direct_io = bool(direct_io)

    def __eq__(self, other):
        return type(other) is type(self) and vars(self) == vars(other)

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"Writer.Options({fields})"

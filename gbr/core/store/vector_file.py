"""The index's vectors in a file beside it (`<index>.vectors`), memory-mapped by readers.

Reading every vector out of DuckDB cost a cold `search` seconds at 100k chunks; mapping a
file of float32 rows costs milliseconds, and the pages the cosine touches come from the
page cache. The file is a copy, never the truth: it is served only while its fingerprint
equals the one computed from the index it sits beside (model, dimension, the writer's
generation, and the count, sum, xor and maximum of the chunk ids), so an index renamed
over by a snapshot, rebuilt, or changed by a daemon is never answered with another index's
vectors; a file that does not match is rebuilt from DuckDB.

Layout: 16 bytes (magic, header length, CRC-32 of the header), a JSON header, then the ids
(int64) and the rows (float32, row-major), each starting on a 64-byte boundary. The header
and the ids are checked on every load (the ids are 1/48 of the rows at 384 dimensions);
the rows are guarded by the exact file size only, since checksumming them would read the
whole file that the mapping exists to avoid reading.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

MAGIC = b"GBRVEC01"
FORMAT = 1
_PREFIX = struct.Struct("<8sII")  # magic, header length, CRC-32 of the header
_ALIGN = 64
SUFFIX = ".vectors"


def file_for(db: Path) -> Path:
    """Where the vectors of the index at `db` live: beside it, named after it."""
    return db.with_name(db.name + SUFFIX)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What identifies one set of vectors in one index, cheap to compute from DuckDB.

    The id statistics change with any insert or delete (ids come from a sequence that only
    grows), and `generation`, renewed by each writing session that changes chunks, tells
    apart two files whose sequences started over (a rebuild) at the same ids.
    """

    model_id: str
    dim: int
    generation: str
    count: int
    id_sum: int
    id_xor: int
    id_max: int

    @classmethod
    def of_ids(cls, model_id: str, dim: int, generation: str, ids: np.ndarray) -> Fingerprint:
        """The fingerprint of these ids (what a file's own ids must agree with)."""
        if ids.shape[0] == 0:
            return cls(model_id, dim, generation, 0, 0, 0, 0)
        return cls(
            model_id,
            dim,
            generation,
            int(ids.shape[0]),
            int(ids.sum(dtype=np.int64)),
            int(np.bitwise_xor.reduce(ids)),
            int(ids.max()),
        )


class DamagedFile(Exception):
    """The file is short, its header or ids fail their checks: it must be rebuilt."""


def load(path: Path, want: Fingerprint) -> tuple[np.ndarray, np.ndarray] | None:
    """(ids, memory-mapped rows) when the file holds exactly the vectors `want` names;
    None when it is missing or belongs to another state of the index; DamagedFile when it
    cannot be trusted at all."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - the mapping below keeps its own reference
    except FileNotFoundError:
        return None
    with handle:
        # One open file for the header and the mapping: a rename over the path meanwhile
        # (another reader rebuilding it) cannot pair this header with other rows.
        size = os.fstat(handle.fileno()).st_size
        header = read_header(handle, size)
        if header.get("fingerprint") != asdict(want):
            return None
        count, dim = want.count, want.dim
        ids_at, rows_at = _offset(header, "ids_offset"), _offset(header, "rows_offset")
        if size != rows_at + count * dim * 4 or ids_at + count * 8 > rows_at:
            raise DamagedFile(f"{size} bytes where the header promises {rows_at + count * dim * 4}")
        handle.seek(ids_at)
        ids = np.frombuffer(handle.read(count * 8), dtype="<i8").astype(np.int64)
        if Fingerprint.of_ids(want.model_id, dim, want.generation, ids) != want:
            raise DamagedFile("its chunk ids do not match its header")
        rows = np.memmap(handle, dtype="<f4", mode="r", offset=rows_at, shape=(count, dim))
    return ids, rows


def _offset(header: dict[str, object], key: str) -> int:
    value = header.get(key)
    if not isinstance(value, int) or value < 0:
        raise DamagedFile(f"its header has no {key}")
    return value


def read_header(handle: BinaryIO, size: int) -> dict[str, object]:
    """The JSON header at the start of an open vector file, checked; DamagedFile if not."""
    read = handle.read
    prefix = read(_PREFIX.size)
    if len(prefix) < _PREFIX.size:
        raise DamagedFile(f"only {size} bytes")
    magic, length, crc = _PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise DamagedFile("not a gbr vector file")
    raw = read(length)
    if len(raw) != length or zlib.crc32(raw) != crc:
        raise DamagedFile("its header fails its checksum")
    try:
        header = json.loads(raw)
    except ValueError as exc:
        raise DamagedFile("its header is not JSON") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise DamagedFile("an unknown format")
    return header


def _mode_of_index(path: Path) -> int:
    try:
        return path.with_name(path.name.removesuffix(SUFFIX)).stat().st_mode & 0o666
    except OSError:
        return 0o644


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def write(path: Path, fingerprint: Fingerprint, ids: np.ndarray, rows: np.ndarray) -> None:
    """Write the file through a temporary one renamed over it, so a reader maps either a
    whole old file or a whole new one. OSError when the folder will not take it."""
    count, dim = fingerprint.count, fingerprint.dim
    if ids.shape != (count,) or rows.shape != (count, dim):
        raise ValueError(f"{ids.shape} ids and {rows.shape} rows for {count} x {dim}")
    # Offsets depend on the header's length, which holds them: fix them on a padded size.
    header = {"format": FORMAT, "fingerprint": asdict(fingerprint)}
    probe = len(json.dumps({**header, "ids_offset": 0, "rows_offset": 0})) + 64
    ids_at = _aligned(_PREFIX.size + probe)
    rows_at = _aligned(ids_at + count * 8)
    raw = json.dumps({**header, "ids_offset": ids_at, "rows_offset": rows_at}).encode()
    raw = raw.ljust(ids_at - _PREFIX.size, b" ")
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _mode_of_index(path))  # readable by whoever may read the index
        with os.fdopen(fd, "wb") as out:
            out.write(_PREFIX.pack(MAGIC, len(raw), zlib.crc32(raw)))
            out.write(raw)
            out.write(np.ascontiguousarray(ids, dtype="<i8").tobytes())
            out.write(b"\0" * (rows_at - ids_at - count * 8))
            np.ascontiguousarray(rows, dtype="<f4").tofile(out)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

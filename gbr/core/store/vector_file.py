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
and the ids are checked on every load, and so are the rows: the header holds a checksum of
the ids and one of the rows (`sums`), so rows reordered, ids reordered or a byte flipped (at
the same size) make the file damaged, and it is rebuilt from DuckDB. Checking reads every
row, but so does the brute-force cosine that follows, which needs the pages anyway; what
the mapping saves is decoding DuckDB's lists. The checksum is a position-weighted sum
(`weighted_sum`) rather than a CRC-32 because it runs at memory speed: 0.6-1.1 ms at 10k
chunks of 384 dimensions and 7-15 ms at 100k, against 5-12 and 40-70 ms for zlib's CRC-32
(2 shared cores). It is not a defence against someone forging a file, only against damage:
any change to one 8-byte word changes it, and so does swapping two rows or two ids.
`status` checks only the header and ids (`verify_rows=False`). Rows that are not finite
are never written.
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
FORMAT = 2  # 2: the header holds `sums`, the checksums of the ids and of the rows
_OLD_FORMATS = (1,)  # files an older gbr wrote: not damaged, only out of date
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


def load(
    path: Path, want: Fingerprint, verify_rows: bool = True
) -> tuple[np.ndarray, np.ndarray] | None:
    """(ids, memory-mapped rows) when the file holds exactly the vectors `want` names;
    None when it is missing or belongs to another state of the index; DamagedFile when it
    cannot be trusted at all (`verify_rows=False`: the rows' checksum is not read)."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - the mapping below keeps its own reference
    except FileNotFoundError:
        return None
    with handle:
        # One open file for the header and the mapping: a rename over the path meanwhile
        # (another reader rebuilding it) cannot pair this header with other rows.
        size = os.fstat(handle.fileno()).st_size
        header = read_header(handle, size)
        if header.get("format") in _OLD_FORMATS or header.get("fingerprint") != asdict(want):
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
    if verify_rows and [weighted_sum(ids), weighted_sum(rows)] != header.get("sums"):
        raise DamagedFile("its ids or rows fail their checksum")
    return ids, rows


def weighted_sum(values: np.ndarray) -> int:
    """A checksum of an array's rows, in order: the sum of each row's 8-byte words (4-byte
    when a row has an odd number of them), weighted by an odd number per row (2r + 1), modulo
    2**64. An odd weight is invertible modulo 2**64, so a change to one word always shows."""
    data = np.ascontiguousarray(values)
    per_row = data.reshape(data.shape[0], -1) if data.ndim > 1 else data.reshape(-1, 1)
    width = per_row.shape[1] * per_row.itemsize
    words = per_row.view("<u8" if width % 8 == 0 else "<u4")
    sums = words.sum(axis=1, dtype=np.uint64)
    weights = np.arange(1, 2 * sums.shape[0], 2, dtype=np.uint64)
    return int(np.multiply(sums, weights).sum(dtype=np.uint64))


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
    if not isinstance(header, dict) or header.get("format") not in (FORMAT, *_OLD_FORMATS):
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
    whole old file or a whole new one. OSError when the folder will not take it;
    ValueError for rows of the wrong shape or not finite."""
    count, dim = fingerprint.count, fingerprint.dim
    if ids.shape != (count,) or rows.shape != (count, dim):
        raise ValueError(f"{ids.shape} ids and {rows.shape} rows for {count} x {dim}")
    id_data = np.ascontiguousarray(ids, dtype="<i8")
    row_data = np.ascontiguousarray(rows, dtype="<f4")
    if not np.isfinite(row_data).all():
        raise ValueError("rows that are not finite")
    sums = [weighted_sum(id_data.astype(np.int64)), weighted_sum(row_data)]
    # Offsets depend on the header's length, which holds them: fix them on a padded size.
    header = {"format": FORMAT, "fingerprint": asdict(fingerprint), "sums": sums}
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
            out.write(id_data.tobytes())
            out.write(b"\0" * (rows_at - ids_at - count * 8))
            row_data.tofile(out)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

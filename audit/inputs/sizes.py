"""Sizes checked before allocating: what a file *declares* is held against available memory first.

A few bytes of header can ask for terabytes: a UCI header's D, a Matrix
Market header's rows, a ``.npy`` shape, the uncompressed size of a ``.npz``
member or a gzip stream. Every reader asks here before it allocates, so a
memory bomb is one message (exit 2) instead of a MemoryError or a machine
out of memory. ``.npz`` members and gzip streams are decompressed in chunks
and stopped at their cap, whatever the archive claims.
"""
from __future__ import annotations

import errno
import io
import math
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from topicaudit.errors import UserError
from topicaudit.inputs.files import open_regular
from topicaudit.memory import available_memory, check_fits_in_memory, format_bytes

_CHUNK = 1 << 20
# An array read from a file is usually copied a few times on its way in (float64, normalised, reordered).
ARRAY_COPIES = 3


def check_bytes(nbytes: float, what: str, fix: str) -> None:
    """Refuse ``what`` when ``nbytes`` is more than the memory available now."""
    check_fits_in_memory(nbytes, what, fix)


# Memory a corpus row, column and stored count take on their way in (indptr, positions, ids, copies).
_BYTES_PER_DOCUMENT, _BYTES_PER_WORD, _BYTES_PER_ENTRY = 100, 100, 64


def check_corpus_bytes(documents: int, words: int, entries: int, what: str, fix: str) -> None:
    """Refuse a bag-of-words corpus whose header declares more documents, words and counts than memory holds."""
    check_bytes(_BYTES_PER_DOCUMENT * documents + _BYTES_PER_WORD * words + _BYTES_PER_ENTRY * entries, what, fix)


def memory_cap() -> int:
    """The most bytes one reader may decompress: the memory available now (or 1 TiB when unknown)."""
    available = available_memory()
    return int(available) if available is not None else 2**40


# -- .npy and .npz ------------------------------------------------------------------------
# The longest .npy header read (NumPy's own default limit): numpy.save writes one of a few hundred bytes.
MAX_NPY_HEADER = 10_000


def _npy_header(stream, where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """The shape, order and dtype a .npy stream declares, read from its header only.

    The header's length is checked here first: NumPy's refusal of a longer one advised ``allow_pickle=True``,
    which a user must never be told to do for a file they were handed."""
    try:
        version = np.lib.format.read_magic(stream)
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise ValueError(f"unsupported .npy version {version}")
        length_field = stream.read(2 if version == (1, 0) else 4)
        if len(length_field) < (2 if version == (1, 0) else 4):
            raise EOFError("the file ends inside its header")
        length = int.from_bytes(length_field, "little")
        if length > MAX_NPY_HEADER:
            raise UserError(f"{where}: its .npy header is {length} bytes long, too large for a Φ file (at most "
                            f"{MAX_NPY_HEADER}; numpy.save writes a few hundred): the file is damaged or not an "
                            "array numpy.save wrote; save the array again with numpy.save")
        header = io.BytesIO(length_field + stream.read(length))
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(header)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(header)
    except UserError:
        raise
    except (ValueError, SyntaxError, TypeError, EOFError, OSError) as error:
        raise UserError(f"{where}: not a readable NumPy array ({error}); save it with numpy.save") from None
    if dtype.hasobject:
        raise UserError(f"{where}: holds pickled Python objects, which topicaudit never loads from .npy/.npz files; "
                        "save a numeric array instead, e.g. numpy.save('phi.npy', numpy.asarray(phi, dtype=float))")
    return tuple(int(n) for n in shape), bool(fortran), dtype


def _declared_bytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    return math.prod(shape) * dtype.itemsize


def _read_exactly(stream, nbytes: int, where: str) -> bytes:
    """``nbytes`` from ``stream`` in chunks; a short stream or one with more is damaged (never read past nbytes+1)."""
    parts, got = [], 0
    while got <= nbytes:
        try:
            part = stream.read(min(_CHUNK, nbytes + 1 - got))
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
            raise UserError(f"{where}: the archive is damaged ({error}); save or write it again") from None
        if not part:
            break
        parts.append(part)
        got += len(part)
    if got != nbytes:
        more = "more" if got > nbytes else f"only {got}"
        raise UserError(f"{where}: its header declares {nbytes} bytes of data but it holds {more}; the file is "
                        "truncated or damaged: save it again")
    return b"".join(parts)


def read_npy(stream, where: str, copies: int = ARRAY_COPIES) -> np.ndarray:
    """One array from a .npy stream: header first, its size checked, then exactly that much data."""
    shape, fortran, dtype = _npy_header(stream, where)
    nbytes = _declared_bytes(shape, dtype)
    check_bytes(copies * nbytes, f"the array in {where} (shape {shape}, {dtype})",
                "the file's header may be damaged; save the array again, or free memory")
    data = _read_exactly(stream, nbytes, where)
    array = np.frombuffer(data, dtype=dtype)
    return array.reshape(shape[::-1]).transpose() if fortran else array.reshape(shape)


class BoundedNpz:
    """A .npz archive read like ``numpy.load``'s ``NpzFile`` (``.files``, ``[name]``), with every member's size
    checked before it is decompressed and decompression stopped at the size its header declares."""

    def __init__(self, source, where: str, copies: int = ARRAY_COPIES):
        """source: the archive's bytes, its path, or a binary file open on it (this object closes it)."""
        self.where, self.copies = where, copies
        opened = hasattr(source, "read")
        if not opened and not isinstance(source, (bytes, bytearray)) and not os.path.lexists(source):
            # a missing file stays a FileNotFoundError: callers word it ("rerun the command that writes it")
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(source))
        handle = source if opened else io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else \
            open_regular(Path(source), "NumPy archive")
        self._handle = handle
        try:
            self._zip = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
            handle.close()
            raise UserError(f"{where}: not a readable .npz archive ({error}); the file is damaged: save or write it "
                            "again") from None
        names = [info.filename for info in self._zip.infolist()]
        self._members = {name[:-4] if name.endswith(".npy") else name: name for name in names}
        self.files = list(self._members)

    def __contains__(self, name: str) -> bool:
        return name in self._members

    def __getitem__(self, name: str) -> np.ndarray:
        member = self._members[name]
        try:
            with self._zip.open(member) as stream:
                return read_npy(stream, f"{self.where}, array {name!r}", self.copies)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, OSError) as error:
            raise UserError(f"{self.where}: cannot read array {name!r} ({error}); the file is damaged: save or "
                            "write it again") from None

    def close(self) -> None:
        self._zip.close()
        self._handle.close()  # a ZipFile does not close a file object it was given

    def __enter__(self) -> BoundedNpz:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load_numpy(raw: bytes, where: str, copies: int = ARRAY_COPIES) -> np.ndarray | BoundedNpz:
    """A .npy array or a .npz archive from a file's bytes, as ``numpy.load`` would give them, sizes checked."""
    if raw[:4] == b"PK\x03\x04" or raw[:4] == b"PK\x05\x06":
        return BoundedNpz(raw, where, copies)
    return read_npy(io.BytesIO(raw), where, copies)


# -- gzip ----------------------------------------------------------------------------------
def gunzip(raw: bytes, where: str, cap: int | None = None) -> bytes:
    """A gzip stream inflated in chunks, refused once it passes ``cap`` bytes (default: half the free memory)."""
    cap = memory_cap() // 2 if cap is None else cap
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out, total, data = [], 0, raw
    while True:
        chunk = inflater.decompress(data, _CHUNK)
        data = inflater.unconsumed_tail
        total += len(chunk)
        if total > cap:
            raise UserError(f"{where}: decompresses to more than {format_bytes(cap)}, more than the memory that can "
                            "hold it; decompress it yourself and check it, or free memory")
        out.append(chunk)
        if inflater.eof:
            if not inflater.unused_data.startswith(b"\x1f\x8b"):  # no further gzip member
                return b"".join(out)
            data, inflater = inflater.unused_data, zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif not chunk and not data:
            raise EOFError("the gzip stream ends early (truncated file)")

"""Parquet files that the starter kit's pinned pyarrow (19.0.0) can read.

pyarrow >= 20 stores "size statistics" (level histograms) in every column chunk's
metadata and leaves the repetition-level histogram out for flat columns. pyarrow
19.0.0 rejects such a file as a whole ("Repetition level histogram size mismatch",
apache/arrow#45283, fixed in 19.0.1). pyarrow's Python writer has no option to turn
size statistics off (the C++ ``size_statistics_level`` is not exposed), so
``write_parquet`` writes normally and then rewrites the file footer without the
optional ``ColumnMetaData.size_statistics`` field (Thrift field 16). Data pages,
offsets and every other footer field are kept byte for byte; the statistics are
only a hint for readers, so nothing is lost for the data.
"""

from __future__ import annotations

import os
from pathlib import Path

MAGIC = b"PAR1"
# Thrift compact protocol type ids
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)
# Path to the field dropped: FileMetaData.row_groups(4) -> RowGroup.columns(1)
# -> ColumnChunk.meta_data(3) -> ColumnMetaData.size_statistics(16).
_ROW_GROUPS, _COLUMNS, _META_DATA, _SIZE_STATISTICS = 4, 1, 3, 16


def write_parquet(frame, path) -> Path:
    """Write a pandas DataFrame (no index) or a pyarrow Table to ``path``, readable by pyarrow 19.0.0."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp)
    data = tmp.read_bytes()
    tmp.write_bytes(strip_size_statistics(data))
    os.replace(tmp, path)
    return path


def strip_size_statistics(data: bytes) -> bytes:
    """The parquet file ``data`` with ColumnMetaData.size_statistics removed from its footer."""
    if len(data) < 12 or data[:4] != MAGIC or data[-4:] != MAGIC:
        raise ValueError("not a parquet file (no PAR1 magic)")
    n = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - n
    footer = data[start:-8]
    out = bytearray()
    end = _copy_struct(footer, 0, out, (_ROW_GROUPS, _COLUMNS, _META_DATA, _SIZE_STATISTICS))
    if end != len(footer):
        raise ValueError("unexpected bytes after the parquet footer")
    return data[:start] + bytes(out) + len(out).to_bytes(4, "little") + MAGIC


def _varint(buf, pos):
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def _put_varint(out, value):
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return


def _skip(buf, pos, ttype):
    """Position just after one value of compact type ``ttype`` starting at ``pos``."""
    if ttype in (_TRUE, _FALSE, _BYTE):
        return pos + 1
    if ttype in (_I16, _I32, _I64):
        return _varint(buf, pos)[1]
    if ttype == _DOUBLE:
        return pos + 8
    if ttype == _BINARY:
        size, pos = _varint(buf, pos)
        return pos + size
    if ttype in (_LIST, _SET):
        head = buf[pos]
        pos += 1
        size, etype = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _varint(buf, pos)
        for _ in range(size):
            pos = _skip(buf, pos, etype)
        return pos
    if ttype == _MAP:
        size, pos = _varint(buf, pos)
        if size:
            kinds = buf[pos]
            pos += 1
            for _ in range(size):
                pos = _skip(buf, pos, kinds >> 4)
                pos = _skip(buf, pos, kinds & 0x0F)
        return pos
    if ttype == _STRUCT:
        last = 0
        while True:
            head = buf[pos]
            pos += 1
            if head == _STOP:
                return pos
            last, pos = _field_id(buf, pos, head, last)
            ftype = head & 0x0F
            if ftype not in (_TRUE, _FALSE):  # a bool field carries its value in the header
                pos = _skip(buf, pos, ftype)
    raise ValueError(f"unknown thrift compact type {ttype}")


def _field_id(buf, pos, head, last):
    delta = head >> 4
    if delta:
        return last + delta, pos
    raw, pos = _varint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def _copy_struct(buf, pos, out, drop_path):
    """Copy the struct at ``pos`` into ``out``; follow ``drop_path`` (field ids) and drop its last
    field. Field headers are re-encoded, since removing a field changes the next one's delta."""
    last_in = last_out = 0
    while True:
        head = buf[pos]
        pos += 1
        if head == _STOP:
            out.append(_STOP)
            return pos
        fid, pos = _field_id(buf, pos, head, last_in)
        last_in = fid
        ftype = head & 0x0F
        value_end = pos if ftype in (_TRUE, _FALSE) else _skip(buf, pos, ftype)
        if len(drop_path) == 1 and fid == drop_path[0]:
            pos = value_end
            continue
        if 0 < fid - last_out <= 15:
            out.append(((fid - last_out) << 4) | ftype)
        else:
            out.append(ftype)
            _put_varint(out, (fid << 1) ^ (fid >> 63))
        last_out = fid
        if len(drop_path) > 1 and fid == drop_path[0] and ftype == _STRUCT:
            pos = _copy_struct(buf, pos, out, drop_path[1:])
        elif len(drop_path) > 1 and fid == drop_path[0] and ftype == _LIST:
            pos = _copy_struct_list(buf, pos, out, drop_path[1:])
        else:
            out += buf[pos:value_end]
            pos = value_end


def _copy_struct_list(buf, pos, out, drop_path):
    head = buf[pos]
    start = pos
    pos += 1
    size = head >> 4
    if size == 15:
        size, pos = _varint(buf, pos)
    out += buf[start:pos]
    if head & 0x0F != _STRUCT:
        raise ValueError("parquet footer: expected a list of structs")
    for _ in range(size):
        pos = _copy_struct(buf, pos, out, drop_path)
    return pos

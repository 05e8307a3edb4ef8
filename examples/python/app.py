"""python-sink: appends Kafka records as JSON lines to a file in a directory
that the connector grants (`plugin.grant.fs.<name>.path`).

The Python twin of plugins/file-sink: `put` turns a batch into JSON lines in
memory and holds every record; `flush` writes the buffer out, syncs the file
and only then settles the held records as accepted. A crash before the sync
means the host redelivers them, never that they are lost.

componentize-py builds this module into a component of the `sink` world
(wit/connector.wit): the classes `Plugin` and `SinkTask` below implement its
two exported interfaces. The `wit_world` package is generated from the WIT at
build time (run `componentize-py -d ../../wit -w sink bindings .` to get a
copy for your editor).
"""

import json
import os
import time
from itertools import chain
from json.encoder import encode_basestring
from typing import List, Optional, Tuple

import spillway
from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import log
from wit_world.imports.errors import Error_Fatal, Error_Retriable
from wit_world.imports.types import (
    ByteStrings,
    ConfigError,
    ConfigKey,
    ConfigType,
    FlushScope,
    FlushScope_All,
    Importance,
    PluginMetadata,
    PutReport,
    RecordBatch,
    Settlement,
)

NAME = "python-sink"
VERSION = "0.1.0"

# Every field a line can have, in the order it is written.
ALL_FIELDS = ["topic", "partition", "offset", "timestamp", "key", "value", "headers"]


def _config_keys() -> List[ConfigKey]:
    return [
        ConfigKey(
            name="file",
            type=ConfigType.STRING,
            default_value=None,
            documentation="Path of the output file; its directory must be granted with "
            "plugin.grant.fs.<name>.path. `{task}` in it becomes the task's number, so that "
            "tasks write files of their own.",
            required=True,
            importance=Importance.HIGH,
        ),
        ConfigKey(
            name="fields",
            type=ConfigType.LIST,
            default_value=",".join(ALL_FIELDS),
            documentation="Which fields each JSON line has, in this order: any of "
            + ", ".join(ALL_FIELDS)
            + ".",
            required=False,
            importance=Importance.MEDIUM,
        ),
    ]


def _parse_fields(value: Optional[str]) -> List[str]:
    if value is None:
        return list(ALL_FIELDS)
    return [f.strip() for f in value.split(",") if f.strip()]


class Plugin(exports.Plugin):
    def metadata(self) -> PluginMetadata:
        return PluginMetadata(
            name=NAME,
            version=VERSION,
            description="Appends records as JSON lines to a file in a granted directory (Python).",
            config=_config_keys(),
        )

    def validate(self, config: List[Tuple[str, str]]) -> List[ConfigError]:
        values = dict(config)
        errors = []
        if values.get("file", "").endswith("/"):
            errors.append(ConfigError(key="file", message="must name a file, not a directory"))
        fields = _parse_fields(values.get("fields"))
        unknown = [f for f in fields if f not in ALL_FIELDS]
        if unknown:
            errors.append(
                ConfigError(
                    key="fields",
                    message=f"unknown field(s) {', '.join(unknown)}; known: {', '.join(ALL_FIELDS)}",
                )
            )
        elif not fields:
            errors.append(ConfigError(key="fields", message="names no field"))
        return errors


# JSON text, as file-sink writes it: compact, non-ASCII kept as it is.
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

# Bytes a JSON string cannot hold as they are (controls, quote, backslash),
# and bytes past ASCII, which need a UTF-8 check: translated to 0x80, so that
# one `isascii()` of the translation tells whether a column needs no escaping.
_NEEDS_CARE = bytes(0x80 if b < 0x20 or b in b'"\\' or b >= 0x80 else 0 for b in range(256))


def _text(b: Optional[bytes]):
    """A key, value or header value as file-sink writes it: UTF-8 text when
    it is, else the list of its byte values; None stays null."""
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return list(b)


def _json_strings(column: ByteStrings) -> Tuple[list, bytes]:
    """Each entry of a byte-strings column for a JSON line, with the
    placeholder that writes it.

    Three speeds, all writing what file-sink writes: a column of ASCII with
    nothing to escape (two C passes over its bytes tell) is written as it
    lies in the batch, between quotes, without a copy; one of UTF-8 text is
    decoded and escaped, a C loop each; anything else (nulls, bytes that are
    not UTF-8) goes entry by entry.
    """
    if 0 not in column.present:
        data = column.data
        if data.translate(_NEEDS_CARE).isascii():
            return spillway.views(column), b'"%b"'
        entries = spillway.strings(column)
        try:
            return list(map(str.encode, map(encode_basestring, map(bytes.decode, entries)))), b"%b"
        except UnicodeDecodeError:
            pass
    else:
        entries = spillway.strings(column)
    return [_dumps(_text(e)).encode() for e in entries], b"%b"


def _topics(records: spillway.Records) -> Tuple[list, bytes]:
    """Each record's topic as JSON text, made once per topic of the batch."""
    texts = [encode_basestring(t).encode() for t in records.batch.topics]
    return list(map(texts.__getitem__, records.topic_indexes)), b"%b"


def _headers(records: spillway.Records) -> Tuple[list, bytes]:
    # A later header of the same key wins, as in file-sink.
    texts = [_dumps({k: _text(v) for k, v in hs}).encode() if hs else b"{}" for hs in records.headers()]
    return texts, b"%b"


# Each field's column and the placeholder that writes it: JSON texts as
# bytes (`%b`), raw text between quotes (`"%b"`), or integers (`%d`).
_COLUMNS = {
    "topic": _topics,
    "partition": lambda r: (r.partitions, b"%d"),
    "offset": lambda r: (r.offsets, b"%d"),
    "timestamp": lambda r: (r.timestamps, b"%d"),
    "key": lambda r: _json_strings(r.batch.keys),
    "value": lambda r: _json_strings(r.batch.values),
    "headers": _headers,
}


# `"name":` of each field.
_KEYS = {f: encode_basestring(f).encode() + b":" for f in ALL_FIELDS}


def _json_lines(records: spillway.Records, fields: List[str]) -> bytes:
    """The batch as JSON lines, made by one `%` over a template of every
    line: each value is copied once, straight into the result, and every
    loop over the records runs in C, none in Python bytecode."""
    columns = [_COLUMNS[f](records) for f in fields]
    line = b"{" + b",".join(_KEYS[f] + placeholder for f, (_, placeholder) in zip(fields, columns)) + b"}\n"
    return (line * len(records)) % tuple(chain.from_iterable(zip(*(values for values, _ in columns))))


class _State:
    """The one task this component instance serves (see the WIT: one instance
    per task), kept in a module global."""

    def __init__(self, path: str, fields: List[str]):
        self.path = path
        self.file = open(path, "ab")
        self.fields = fields
        self.chunks: List[bytes] = []  # one per batch, written by flush
        self.held: List = []  # id ranges
        # Totals logged at stop.
        self.records = 0
        self.batches = 0
        self.put_seconds = 0.0
        self.flushes = 0
        self.flush_seconds = 0.0


STATE: Optional[_State] = None


def _state() -> _State:
    if STATE is None:
        raise Err(Error_Fatal("put before start"))
    return STATE


class SinkTask(exports.SinkTask):
    def start(self, config: List[Tuple[str, str]]) -> None:
        global STATE
        values = dict(config)
        if "file" not in values:
            raise Err(Error_Fatal("missing required key 'file'"))
        path = values["file"].replace("{task}", values.get("task.id", "0"))
        fields = _parse_fields(values.get("fields"))
        problems = Plugin().validate(config)
        if problems:
            raise Err(Error_Fatal("; ".join(f"{p.key}: {p.message}" for p in problems)))
        try:
            STATE = _State(path, fields)
        except OSError as e:
            raise Err(Error_Fatal(f"cannot open '{path}': {e} (is its directory granted?)"))
        log.log(log.Level.INFO, f"appending to {path} (fields: {','.join(fields)})")

    def put(self, batch: RecordBatch) -> PutReport:
        s = _state()
        started = time.perf_counter()
        records = spillway.Records(batch)
        if len(records):
            s.chunks.append(_json_lines(records, s.fields))
            s.held.extend(records.id_ranges())
            s.records += len(records)
            s.batches += 1
        s.put_seconds += time.perf_counter() - started
        return spillway.report(records, spillway.HOLD)

    def flush(self, scope: FlushScope) -> List[Settlement]:
        # One file holds every record, so any flush writes out the whole buffer
        # and settles every held record, whatever `scope` named.
        s = STATE
        if s is None or not s.held:
            return []
        started = time.perf_counter()
        try:
            s.file.write(b"".join(s.chunks))
            s.file.flush()
            os.fsync(s.file.fileno())
        except OSError as e:
            # The records stay held: nothing is acknowledged that is not on disk.
            raise Err(Error_Retriable(f"write to '{s.path}' failed: {e}"))
        s.chunks.clear()
        settled = spillway.settle(s.held, spillway.ACCEPT)
        s.held.clear()
        s.flushes += 1
        s.flush_seconds += time.perf_counter() - started
        return settled

    def stop(self) -> None:
        global STATE
        if STATE is None:
            return
        s = STATE
        try:
            self.flush(FlushScope_All())
        except Err as e:
            log.log(log.Level.ERROR, f"final flush failed: {e.value.value}")
        log.log(
            log.Level.INFO,
            f"wrote {s.records} records in {s.batches} batches to {s.path}; "
            f"put {s.put_seconds * 1000:.1f} ms in all "
            f"({s.records / s.put_seconds if s.put_seconds > 0 else 0:.0f} records/s), "
            f"{s.flushes} flushes {s.flush_seconds * 1000:.1f} ms",
        )
        s.file.close()
        STATE = None

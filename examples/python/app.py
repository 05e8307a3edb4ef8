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
from typing import List, Optional, Tuple

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import log
from wit_world.imports.errors import Error_Fatal, Error_Retriable
from wit_world.imports.types import (
    ConfigError,
    ConfigKey,
    ConfigType,
    FlushScope,
    FlushScope_All,
    Importance,
    Outcome_Accept,
    Outcome_Hold,
    PluginMetadata,
    PutReport,
    Settlement,
    SinkRecord,
)

NAME = "python-sink"
VERSION = "0.1.0"

# Every field a line can have, in the order it is written.
ALL_FIELDS = ["topic", "partition", "offset", "timestamp", "key", "value", "headers"]

HOLD = Outcome_Hold()
ACCEPT = Outcome_Accept()


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


def _text(b: Optional[bytes]):
    """Keys, values and header values as UTF-8 text when they are, else as a
    list of byte values (as file-sink writes them)."""
    if b is None:
        return None
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return list(b)


# How each field of a line is taken from a record.
_GETTERS = {
    "topic": lambda r: r.topic,
    "partition": lambda r: r.partition,
    "offset": lambda r: r.offset,
    "timestamp": lambda r: r.timestamp,
    "key": lambda r: _text(r.key),
    "value": lambda r: _text(r.value),
    "headers": lambda r: {h.key: _text(h.value) for h in r.headers},
}


class _State:
    """The one task this component instance serves (see the WIT: one instance
    per task), kept in a module global."""

    def __init__(self, path: str, fields: List[str]):
        self.path = path
        self.file = open(path, "ab")
        self.getters = [(f, _GETTERS[f]) for f in fields]
        self.encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
        self.chunks: List[bytes] = []  # one per batch, written by flush
        self.held: List[int] = []
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

    def put(self, batch: List[SinkRecord]) -> PutReport:
        s = _state()
        started = time.perf_counter()
        if batch:
            encode = s.encoder.encode
            getters = s.getters
            # The whole batch becomes one chunk of lines: no host call per record.
            lines = [encode({name: get(r) for name, get in getters}) for r in batch]
            lines.append("")
            s.chunks.append("\n".join(lines).encode("utf-8"))
            s.held.extend(r.id for r in batch)
            s.records += len(batch)
            s.batches += 1
        s.put_seconds += time.perf_counter() - started
        return PutReport(outcomes=[HOLD] * len(batch), settled=[])

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
        settled = [Settlement(id=i, outcome=ACCEPT) for i in s.held]
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

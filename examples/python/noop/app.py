"""python-noop-sink: accepts every record and writes nothing.

The smallest Python sink, the twin of plugins/noop-sink: a template to start
from, and the benchmarks' measure of what a `put` costs in Python before any
work (the batch crossing into CPython and the report coming back).
"""

import spillway
from wit_world import exports
from wit_world.imports.types import PluginMetadata, PutReport, RecordBatch


class Plugin(exports.Plugin):
    def metadata(self) -> PluginMetadata:
        return PluginMetadata(
            name="python-noop-sink",
            version="0.1.0",
            description="Accepts every record, writes nothing (Python).",
            config=[],
        )

    def validate(self, config):
        return []


class SinkTask(exports.SinkTask):
    def start(self, config) -> None:
        pass

    def put(self, batch: RecordBatch) -> PutReport:
        return spillway.report(batch.count, spillway.ACCEPT)

    def flush(self, scope):
        return []

    def stop(self) -> None:
        pass

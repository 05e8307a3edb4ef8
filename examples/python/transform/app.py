"""python-redact: an example transform. It replaces the named fields of each
record's value (a JSON object) with a fixed string, and can stamp each
record with the build that transformed it. The twin of examples/rust/redact
and examples/javascript/transform, key for key.

A null value (a tombstone) passes on as it is; a value that is not a JSON
object cannot be redacted and fails, to the dead-letter queue.

componentize-py builds this module into a component of the `transform`
world (wit/connector.wit): the classes `Plugin` and `Transformation` below
implement its two exported interfaces.
"""

import json
from typing import List, Optional

import spillway
from componentize_py_types import Err
from wit_world import exports
from wit_world.imports.errors import Error_Fatal
from wit_world.imports.types import (
    ConfigError,
    ConfigKey,
    ConfigType,
    Importance,
    PluginMetadata,
    RecordBatch,
    Transformed,
)

NAME = "python-redact"
VERSION = "0.1.0"


def _key(name, type, default, documentation, required=False):
    return ConfigKey(
        name=name,
        type=type,
        default_value=default,
        documentation=documentation,
        required=required,
        importance=Importance.HIGH if required else Importance.MEDIUM,
    )


KEYS = [
    _key("fields", ConfigType.LIST, None, "The top-level fields of the value to redact.", required=True),
    _key("replacement", ConfigType.STRING, "****", "What a redacted field's value becomes."),
    _key(
        "lineage.field",
        ConfigType.STRING,
        "",
        "When set, a field of this name is added to each value, naming the transform's build (name/version).",
    ),
]


class Settings:
    def __init__(self, config):
        given = dict(config)
        self.fields = [f.strip() for f in given.get("fields", "").split(",") if f.strip()]
        self.replacement = given.get("replacement", "****")
        self.lineage = given.get("lineage.field", "").strip() or None

    def errors(self) -> List[ConfigError]:
        if not self.fields:
            return [ConfigError(key="fields", message="name at least one field to redact")]
        return []


class Plugin(exports.Plugin):
    def metadata(self) -> PluginMetadata:
        return PluginMetadata(
            name=NAME, version=VERSION, description="Redacts fields of JSON values (an example).", config=KEYS
        )

    def validate(self, config) -> List[ConfigError]:
        return Settings(config).errors()


# The stage's settings, from `start`: one component instance serves one
# stage, and componentize-py makes a new `Transformation` for each call.
STAGE: Optional[Settings] = None


def _one(record) -> Transformed:
    if record.value is None:
        return spillway.keep(record)
    try:
        value = json.loads(record.value)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        return spillway.fail("the value is not a JSON object")
    for field in STAGE.fields:
        if field in value:
            value[field] = STAGE.replacement
    if STAGE.lineage:
        value[STAGE.lineage] = f"{NAME}/{VERSION}"
    return spillway.keep(record, value=json.dumps(value, separators=(",", ":")).encode())


class Transformation(exports.Transformation):
    def start(self, config) -> None:
        global STAGE
        settings = Settings(config)
        errors = settings.errors()
        if errors:
            raise Err(Error_Fatal("; ".join(f"{e.key}: {e.message}" for e in errors)))
        STAGE = settings

    def apply(self, batch: RecordBatch) -> List[Transformed]:
        return list(map(_one, spillway.Records(batch)))

    def stop(self) -> None:
        pass

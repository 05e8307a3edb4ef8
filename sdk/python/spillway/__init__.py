"""Write a Spillway sink in Python: a thin layer over the bindings that
componentize-py generates from the WIT contract (`wit/connector.wit`).

The host hands `put` a `RecordBatch` of columns, numbers as little-endian
bytes and byte strings laid end to end, so that a batch of any size crosses
into CPython as a dozen `bytes` objects instead of one Python object per
field of every record. `Records` reads those columns in place:

    def put(self, batch):
        records = spillway.Records(batch)
        values = records.values()          # list of bytes (or None), C speed
        offsets = records.offsets          # memoryview of int64, no copy
        for record in records:             # or one namedtuple per record
            ...
        return spillway.report(records, spillway.ACCEPT)

Loops that stay in C (`map`, `zip`, `str.join`, `%` formatting) keep a
batch's cost near the copying of its bytes; a Python statement per record
costs about a microsecond here. `report`, `report_each` and `settle` build the
contract's outcome runs and id ranges.

A transform (world `transform`) answers `apply` with one fate per record
of the batch, in order: `keep(record, value=...)` (the record goes on, with
the changes given), `DROP` (filtered out) or `fail(reason)` (to the
dead-letter queue).

Add this directory to componentize-py's path: `componentize-py -d wit -w
sink componentize app -p . -p <repo>/sdk/python -o sink.wasm` (`-w
transform` for a transform).
"""

from collections import namedtuple
from itertools import groupby
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from wit_world.imports.types import (
    ByteStrings,
    FlushScope,
    FlushScope_Records,
    IdRange,
    Outcome,
    Outcome_Accept,
    Outcome_Hold,
    Outcome_Reject,
    Outcome_Retry,
    OutcomeRun,
    PutReport,
    RecordBatch,
    Settlement,
    TimestampType,
    Transformed,
    Transformed_Drop,
    Transformed_Fail,
    Transformed_Keep,
    TransformedRecord,
)

__all__ = [
    "ACCEPT",
    "DROP",
    "fail",
    "keep",
    "HOLD",
    "Record",
    "Records",
    "reject",
    "report",
    "report_each",
    "retry",
    "scope_ids",
    "settle",
    "strings",
    "views",
]

#: Written durably: the host acknowledges the record.
ACCEPT = Outcome_Accept()
#: Buffered, not yet durable: a later `put` or `flush` settles it.
HOLD = Outcome_Hold()


#: A transform's answer for a record it filters out: done, not put.
DROP = Transformed_Drop()


def keep(record: "Record", **changes) -> Transformed:
    """A transform's answer for a record that goes on: `record` with
    `changes` (any of topic, key, value, timestamp, headers) applied."""
    r = record._replace(**changes) if changes else record
    return Transformed_Keep(
        TransformedRecord(topic=r.topic, key=r.key, value=r.value, timestamp=r.timestamp, headers=list(r.headers))
    )


def fail(reason: str) -> Transformed:
    """A transform's answer for a record it cannot transform: to the
    dead-letter queue at stage TRANSFORMATION, or the task fails."""
    return Transformed_Fail(reason)


def retry(reason: str) -> Outcome:
    """Failed now, may pass later: the host puts the record again."""
    return Outcome_Retry(reason)


def reject(reason: str) -> Outcome:
    """Can never be written: to the dead-letter queue, or the task fails."""
    return Outcome_Reject(reason)


#: One record, for plugins that take them one by one.
Record = namedtuple(
    "Record",
    "id topic partition offset timestamp timestamp_type key value headers delivery_count lock_deadline",
)

_TIMESTAMP_TYPES = list(TimestampType)


def strings(column: ByteStrings) -> List[Optional[bytes]]:
    """Each entry of a byte-strings column as `bytes`, or None where null."""
    ends = memoryview(column.offsets).cast("I")
    entries = list(map(column.data.__getitem__, map(slice, ends[:-1], ends[1:])))
    if 0 in column.present:
        entries = [e if p else None for e, p in zip(entries, column.present)]
    return entries


def views(column: ByteStrings) -> List[memoryview]:
    """Each entry of a byte-strings column as a memoryview into the batch,
    without a copy (null entries are empty). `%b` formatting, `bytes.join`
    and file writes take them as they take `bytes`."""
    ends = memoryview(column.offsets).cast("I")
    return list(map(memoryview(column.data).__getitem__, map(slice, ends[:-1], ends[1:])))


class Records:
    """The records of one `put`, column by column.

    Fixed-width columns are memoryviews over the batch's bytes (indexable,
    `len`, `tolist()`); the others are lists built on demand.
    """

    __slots__ = (
        "batch",
        "ids",
        "topic_indexes",
        "partitions",
        "offsets",
        "timestamps",
        "delivery_counts",
        "_deadlines",
    )

    def __init__(self, batch: RecordBatch):
        self.batch = batch
        self.ids = memoryview(batch.ids).cast("Q")
        #: Which of `batch.topics` each record comes from.
        self.topic_indexes = memoryview(batch.topic_indexes).cast("H")
        self.partitions = memoryview(batch.partitions).cast("i")
        self.offsets = memoryview(batch.offsets).cast("q")
        #: Milliseconds since the Unix epoch; -1 when there is none.
        self.timestamps = memoryview(batch.timestamps).cast("q")
        self.delivery_counts = memoryview(batch.delivery_counts).cast("H")
        self._deadlines = memoryview(batch.lock_deadlines).cast("q")

    def __len__(self) -> int:
        return self.batch.count

    def topics(self) -> List[str]:
        """Each record's topic."""
        return list(map(self.batch.topics.__getitem__, self.topic_indexes))

    def keys(self) -> List[Optional[bytes]]:
        return strings(self.batch.keys)

    def values(self) -> List[Optional[bytes]]:
        return strings(self.batch.values)

    def timestamp_types(self) -> List[TimestampType]:
        return list(map(_TIMESTAMP_TYPES.__getitem__, self.batch.timestamp_types))

    def headers(self) -> List[List[Tuple[str, Optional[bytes]]]]:
        """Each record's headers as (key, value) pairs, in order."""
        b = self.batch
        bounds = memoryview(b.header_offsets).cast("I")
        if bounds[-1] == 0:
            return [[] for _ in range(b.count)]
        keys = [k.decode("utf-8") for k in strings(b.header_keys)]
        pairs = list(zip(keys, strings(b.header_values)))
        return list(map(pairs.__getitem__, map(slice, bounds[:-1], bounds[1:])))

    def lock_deadlines(self) -> List[Optional[int]]:
        """When each record's acquisition lock runs out (ms since the Unix
        epoch); None under a classic consumer group."""
        return [d if d >= 0 else None for d in self._deadlines]

    def __iter__(self) -> Iterator[Record]:
        return map(
            Record,
            self.ids,
            self.topics(),
            self.partitions,
            self.offsets,
            self.timestamps,
            self.timestamp_types(),
            self.keys(),
            self.values(),
            self.headers(),
            self.delivery_counts,
            self.lock_deadlines(),
        )

    def id_ranges(self) -> List[IdRange]:
        """The batch's ids as ranges of consecutive ids: usually one."""
        return _ranges(self.ids)


def _ranges(ids: Sequence[int]) -> List[IdRange]:
    if not ids:
        return []
    first = ids[0]
    if ids[-1] - first == len(ids) - 1 and list(ids) == list(range(first, first + len(ids))):
        return [IdRange(first, len(ids))]
    ranges: List[IdRange] = []
    for i in ids:
        last = ranges[-1] if ranges else None
        if last is not None and last.first + last.count == i:
            last.count += 1
        else:
            ranges.append(IdRange(i, 1))
    return ranges


def report(records: Union[Records, int], outcome: Outcome, settled: Sequence[Settlement] = ()) -> PutReport:
    """One outcome for every record of the batch (`records` or a count),
    with `settled` for records held before."""
    count = records if isinstance(records, int) else len(records)
    runs = [OutcomeRun(count, outcome)] if count else []
    return PutReport(outcomes=runs, settled=list(settled))


def report_each(outcomes: Sequence[Outcome], settled: Sequence[Settlement] = ()) -> PutReport:
    """One outcome per record, in the batch's order."""
    runs = [OutcomeRun(sum(1 for _ in run), outcome) for outcome, run in groupby(outcomes)]
    return PutReport(outcomes=runs, settled=list(settled))


def settle(ids: Union[Sequence[IdRange], Sequence[int]], outcome: Outcome = ACCEPT) -> List[Settlement]:
    """Settlements of held records, by id ranges (`Records.id_ranges()`)
    or by ids."""
    ranges = ids if ids and isinstance(ids[0], IdRange) else _ranges(list(ids))
    return [Settlement(ids=r, outcome=outcome) for r in ranges]


def scope_ids(scope: FlushScope) -> Optional[List[int]]:
    """The ids a scoped flush names; None for `all`."""
    if isinstance(scope, FlushScope_Records):
        return [r.first + i for r in scope.value for i in range(r.count)]
    return None

"""The Python SDK layer on the host's own CPython, against batches packed as
the contract lays them out (wit/connector.wit, `record-batch`).

    scripts/test-sdks.sh        (generates the bindings it imports, then runs this)
"""

import struct
import unittest

import spillway
from wit_world.imports.types import (
    ByteStrings,
    FlushScope_All,
    FlushScope_Records,
    IdRange,
    Outcome_Accept,
    Outcome_Hold,
    OutcomeRun,
    RecordBatch,
    Settlement,
    TimestampType,
    Transformed_Drop,
    Transformed_Fail,
    Transformed_Keep,
    TransformedRecord,
)


def byte_strings(entries):
    data, ends, present = b"", [0], b""
    for e in entries:
        data += e or b""
        ends.append(len(data))
        present += b"\x01" if e is not None else b"\x00"
    return ByteStrings(data=data, offsets=struct.pack(f"<{len(ends)}I", *ends), present=present)


def pack(records):
    """Records as dicts, into a RecordBatch as the host packs one."""
    topics = list(dict.fromkeys(r["topic"] for r in records))
    headers = [h for r in records for h in r["headers"]]
    header_ends, total = [0], 0
    for r in records:
        total += len(r["headers"])
        header_ends.append(total)
    n = len(records)
    return RecordBatch(
        count=n,
        ids=struct.pack(f"<{n}Q", *(r["id"] for r in records)),
        topics=topics,
        topic_indexes=struct.pack(f"<{n}H", *(topics.index(r["topic"]) for r in records)),
        partitions=struct.pack(f"<{n}i", *(r["partition"] for r in records)),
        offsets=struct.pack(f"<{n}q", *(r["offset"] for r in records)),
        timestamps=struct.pack(f"<{n}q", *(r["timestamp"] for r in records)),
        timestamp_types=bytes(r["timestamp_type"] for r in records),
        keys=byte_strings([r["key"] for r in records]),
        values=byte_strings([r["value"] for r in records]),
        header_offsets=struct.pack(f"<{n + 1}I", *header_ends),
        header_keys=byte_strings([k.encode() for k, _ in headers]),
        header_values=byte_strings([v for _, v in headers]),
        delivery_counts=struct.pack(f"<{n}H", *(r["delivery_count"] for r in records)),
        lock_deadlines=struct.pack(f"<{n}q", *(r["lock_deadline"] for r in records)),
    )


RECORDS = [
    dict(id=7, topic="a", partition=0, offset=10, timestamp=-1, timestamp_type=0, key=None, value=b"v0",
         headers=[("h", b"1"), ("h", None)], delivery_count=1, lock_deadline=-1),
    dict(id=8, topic="b", partition=3, offset=2**40, timestamp=1_700_000_000_000, timestamp_type=2, key=b"",
         value=None, headers=[], delivery_count=4, lock_deadline=1_800_000_000_000),
    dict(id=9, topic="a", partition=-1, offset=12, timestamp=5, timestamp_type=1, key=b"k\xff",
         value=b"", headers=[("x", b"")], delivery_count=2, lock_deadline=-1),
]


class RecordsTest(unittest.TestCase):
    def test_columns_are_read_in_place_and_record_by_record(self):
        records = spillway.Records(pack(RECORDS))
        self.assertEqual(len(records), 3)
        self.assertEqual(list(records.ids), [7, 8, 9])
        self.assertEqual(records.topics(), ["a", "b", "a"])
        self.assertEqual(records.partitions.tolist(), [0, 3, -1])
        self.assertEqual(records.offsets.tolist(), [10, 2**40, 12])
        self.assertEqual(records.keys(), [None, b"", b"k\xff"], "a null key and an empty one differ")
        self.assertEqual(records.values(), [b"v0", None, b""])
        self.assertEqual(records.headers(), [[("h", b"1"), ("h", None)], [], [("x", b"")]])
        self.assertEqual(records.lock_deadlines(), [None, 1_800_000_000_000, None])
        self.assertEqual(
            records.timestamp_types(),
            [TimestampType.NO_TIMESTAMP_TYPE, TimestampType.LOG_APPEND_TIME, TimestampType.CREATE_TIME],
        )
        first, second, _ = list(records)
        self.assertEqual((first.id, first.topic, first.key, first.value), (7, "a", None, b"v0"))
        self.assertEqual((second.offset, second.delivery_count, second.timestamp), (2**40, 4, 1_700_000_000_000))

    def test_views_are_the_entries_without_a_copy(self):
        batch = pack(RECORDS)
        views = spillway.views(batch.values)
        self.assertEqual([bytes(v) for v in views], [b"v0", b"", b""], "a null entry is an empty view")
        self.assertIs(views[0].obj, batch.values.data, "a view into the batch, not a copy")
        self.assertEqual(b"<%b>" % views[0], b"<v0>")

    def test_an_empty_batch(self):
        records = spillway.Records(pack([]))
        self.assertEqual((len(records), records.values(), records.headers(), list(records)), (0, [], [], []))
        self.assertEqual(records.id_ranges(), [])
        self.assertEqual(spillway.report(records, spillway.ACCEPT).outcomes, [])

    def test_ids_become_ranges(self):
        self.assertEqual(spillway.Records(pack(RECORDS)).id_ranges(), [IdRange(7, 3)])
        ids = [dict(RECORDS[0], id=i) for i in (3, 4, 9, 2)]
        self.assertEqual(spillway.Records(pack(ids)).id_ranges(), [IdRange(3, 2), IdRange(9, 1), IdRange(2, 1)])


class OutcomesTest(unittest.TestCase):
    def test_one_outcome_for_a_batch_is_one_run(self):
        report = spillway.report(5, spillway.HOLD, spillway.settle([IdRange(1, 2)]))
        self.assertEqual(report.outcomes, [OutcomeRun(5, Outcome_Hold())])
        self.assertEqual(report.settled, [Settlement(ids=IdRange(1, 2), outcome=Outcome_Accept())])

    def test_outcomes_per_record_become_runs(self):
        bad = spillway.reject("bad")
        report = spillway.report_each([spillway.ACCEPT, spillway.ACCEPT, bad, bad, spillway.retry("later")])
        self.assertEqual(
            report.outcomes,
            [OutcomeRun(2, Outcome_Accept()), OutcomeRun(2, bad), OutcomeRun(1, spillway.retry("later"))],
        )

    def test_settlements_by_ids_become_ranges(self):
        self.assertEqual(
            spillway.settle([5, 6, 7, 9], spillway.HOLD),
            [Settlement(IdRange(5, 3), Outcome_Hold()), Settlement(IdRange(9, 1), Outcome_Hold())],
        )

    def test_a_scoped_flush_names_its_ids(self):
        self.assertIsNone(spillway.scope_ids(FlushScope_All()))
        self.assertEqual(spillway.scope_ids(FlushScope_Records([IdRange(4, 2), IdRange(10, 1)])), [4, 5, 10])


class TransformedTest(unittest.TestCase):
    def test_a_kept_record_carries_its_changes_and_the_rest_as_it_was(self):
        first = next(iter(spillway.Records(pack(RECORDS))))
        kept = spillway.keep(first, value=b"changed", topic="t2")
        self.assertEqual(
            kept,
            Transformed_Keep(
                TransformedRecord(topic="t2", key=None, value=b"changed", timestamp=-1, headers=[("h", b"1"), ("h", None)])
            ),
        )
        self.assertEqual(spillway.keep(first).value.value, b"v0")
        self.assertEqual(spillway.DROP, Transformed_Drop())
        self.assertEqual(spillway.fail("bad"), Transformed_Fail("bad"))


if __name__ == "__main__":
    unittest.main()

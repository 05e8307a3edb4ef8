// The JavaScript SDK layer on the host's Node, against batches packed as the
// contract lays them out (wit/connector.wit, `record-batch`), in the shape
// componentize-js hands them to `put` (camelCase fields, Uint8Arrays).
//
//   node --test sdk/javascript/

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  ACCEPT,
  DROP,
  HOLD,
  Records,
  fail,
  keep,
  ranges,
  reject,
  report,
  reportEach,
  retry,
  scopeIds,
  settle,
} from './spillway.js';

function le(Type, values) {
  return new Uint8Array(Type.from(values).buffer);
}

function byteStrings(entries) {
  const encoder = new TextEncoder();
  const bytes = entries.map((e) => (e === undefined ? new Uint8Array() : typeof e === 'string' ? encoder.encode(e) : e));
  const ends = [0];
  for (const b of bytes) ends.push(ends[ends.length - 1] + b.length);
  const data = new Uint8Array(ends[ends.length - 1]);
  bytes.forEach((b, i) => data.set(b, ends[i]));
  return { data, offsets: le(Uint32Array, ends), present: Uint8Array.from(entries, (e) => (e === undefined ? 0 : 1)) };
}

/** Records as objects, into a batch as the host packs one. */
function pack(records) {
  const topics = [...new Set(records.map((r) => r.topic))];
  const headers = records.flatMap((r) => r.headers);
  const headerEnds = [0];
  for (const r of records) headerEnds.push(headerEnds[headerEnds.length - 1] + r.headers.length);
  return {
    count: records.length,
    ids: le(BigUint64Array, records.map((r) => r.id)),
    topics,
    topicIndexes: le(Uint16Array, records.map((r) => topics.indexOf(r.topic))),
    partitions: le(Int32Array, records.map((r) => r.partition)),
    offsets: le(BigInt64Array, records.map((r) => r.offset)),
    timestamps: le(BigInt64Array, records.map((r) => r.timestamp)),
    timestampTypes: Uint8Array.from(records.map((r) => r.timestampType)),
    keys: byteStrings(records.map((r) => r.key)),
    values: byteStrings(records.map((r) => r.value)),
    headerOffsets: le(Uint32Array, headerEnds),
    headerKeys: byteStrings(headers.map(([k]) => k)),
    headerValues: byteStrings(headers.map(([, v]) => v)),
    deliveryCounts: le(Uint16Array, records.map((r) => r.deliveryCount)),
    lockDeadlines: le(BigInt64Array, records.map((r) => r.lockDeadline)),
  };
}

const RECORDS = [
  { id: 7n, topic: 'a', partition: 0, offset: 10n, timestamp: -1n, timestampType: 0, key: undefined, value: 'v0',
    headers: [['h', '1'], ['h', undefined]], deliveryCount: 1, lockDeadline: -1n },
  { id: 8n, topic: 'b', partition: 3, offset: 2n ** 40n, timestamp: 1_700_000_000_000n, timestampType: 2, key: '',
    value: undefined, headers: [], deliveryCount: 4, lockDeadline: 1_800_000_000_000n },
  { id: 9n, topic: 'a', partition: -1, offset: 12n, timestamp: 5n, timestampType: 1, key: new Uint8Array([107, 255]),
    value: '', headers: [['x', '']], deliveryCount: 2, lockDeadline: -1n },
];

const text = (bytes) => (bytes === undefined ? undefined : Array.from(bytes));

test('columns are read in place, and record by record', () => {
  const records = new Records(pack(RECORDS));
  assert.equal(records.count, 3);
  assert.deepEqual(Array.from(records.ids), [7n, 8n, 9n]);
  assert.deepEqual(records.topics(), ['a', 'b', 'a']);
  assert.deepEqual(Array.from(records.partitions), [0, 3, -1]);
  assert.deepEqual(Array.from(records.offsets), [10n, 2n ** 40n, 12n]);
  assert.deepEqual(records.keys().map(text), [undefined, [], [107, 255]], 'a null key and an empty one differ');
  assert.deepEqual(records.values().map(text), [[118, 48], undefined, []]);
  assert.deepEqual(
    records.headers().map((pairs) => pairs.map(([k, v]) => [k, text(v)])),
    [[['h', [49]], ['h', undefined]], [], [['x', []]]],
  );
  assert.deepEqual(records.timestampTypes(), ['no-timestamp-type', 'log-append-time', 'create-time']);
  const [first, second] = [...records];
  assert.equal(first.key, undefined);
  assert.equal(first.lockDeadline, undefined);
  assert.equal(second.lockDeadline, 1_800_000_000_000n);
  assert.equal(second.deliveryCount, 4);
});

test('a column that does not start at a multiple of its width is copied, not misread', () => {
  const batch = pack(RECORDS);
  const shifted = new Uint8Array(batch.offsets.length + 1);
  shifted.set(batch.offsets, 1);
  batch.offsets = shifted.subarray(1);
  assert.deepEqual(Array.from(new Records(batch).offsets), [10n, 2n ** 40n, 12n]);
});

test('an empty batch', () => {
  const records = new Records(pack([]));
  assert.deepEqual([records.count, records.values(), records.headers(), [...records]], [0, [], [], []]);
  assert.deepEqual(records.idRanges(), []);
  assert.deepEqual(report(0, ACCEPT).outcomes, []);
});

test('ids become ranges', () => {
  assert.deepEqual(new Records(pack(RECORDS)).idRanges(), [{ first: 7n, count: 3 }]);
  assert.deepEqual(ranges([3n, 4n, 9n, 2n]), [{ first: 3n, count: 2 }, { first: 9n, count: 1 }, { first: 2n, count: 1 }]);
});

test('outcomes and settlements', () => {
  assert.deepEqual(report(5, HOLD, settle([{ first: 1n, count: 2 }])), {
    outcomes: [{ count: 5, outcome: HOLD }],
    settled: [{ ids: { first: 1n, count: 2 }, outcome: ACCEPT }],
  });
  const bad = reject('bad');
  assert.deepEqual(reportEach([ACCEPT, ACCEPT, bad, reject('bad'), retry('later')]).outcomes, [
    { count: 2, outcome: ACCEPT },
    { count: 2, outcome: bad },
    { count: 1, outcome: retry('later') },
  ]);
  assert.equal(scopeIds({ tag: 'all' }), undefined);
  assert.deepEqual(scopeIds({ tag: 'records', val: [{ first: 4n, count: 2 }, { first: 10n, count: 1 }] }), [4n, 5n, 10n]);
});

test('a kept record carries its changes and the rest as it was', () => {
  const record = { id: 7n, topic: 'a', partition: 0, offset: 1n, timestamp: 5n, key: undefined, value: Uint8Array.of(1), headers: [['h', undefined]] };
  assert.deepEqual(keep(record, { value: Uint8Array.of(2), topic: 'b' }), {
    tag: 'keep',
    val: { topic: 'b', key: undefined, value: Uint8Array.of(2), timestamp: 5n, headers: [['h', undefined]] },
  });
  assert.deepEqual(keep(record).val.value, Uint8Array.of(1));
  assert.deepEqual(DROP, { tag: 'drop' });
  assert.deepEqual(fail('bad'), { tag: 'fail', val: 'bad' });
});

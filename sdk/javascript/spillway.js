// Write a Spillway sink in JavaScript: a thin layer over what
// componentize-js makes of the WIT contract (wit/connector.wit).
//
// The host hands `put` a record batch of columns, numbers as little-endian
// bytes and byte strings laid end to end, so that a batch of any size
// crosses into the engine as a dozen Uint8Arrays instead of one JavaScript
// object per field of every record (StarlingMonkey interprets JavaScript:
// each of those costs about a microsecond). `Records` reads the columns in
// place, as typed arrays:
//
//   import { Records, report, HOLD } from './spillway.js';
//   put(batch) {
//     const records = new Records(batch);
//     const values = records.values();        // Uint8Array views (or undefined)
//     const offsets = records.offsets;        // BigInt64Array, no copy
//     for (const record of records) { ... }   // or one object per record
//     return report(records.count, HOLD);
//   }
//
// `report`, `reportEach` and `settle` build the contract's outcome runs and
// id ranges. componentize-js takes one module and the files it imports, so
// build from a directory that holds both (see examples/javascript/build.mjs).

export const ACCEPT = { tag: 'accept' };
export const HOLD = { tag: 'hold' };
/** A transform's answer for a record it filters out: done, not put. */
export const DROP = { tag: 'drop' };
/** A transform's answer for a record that goes on: `record` (as `Records`
 * yields it) with `changes` (any of topic, key, value, timestamp, headers)
 * applied. */
export function keep(record, changes = {}) {
  const r = { ...record, ...changes };
  return { tag: 'keep', val: { topic: r.topic, key: r.key, value: r.value, timestamp: r.timestamp, headers: r.headers } };
}
/** A transform's answer for a record it cannot transform: to the
 * dead-letter queue at stage TRANSFORMATION, or the task fails. */
export const fail = (reason) => ({ tag: 'fail', val: reason });
/** Failed now, may pass later: the host puts the record again. */
export const retry = (reason) => ({ tag: 'retry', val: reason });
/** Can never be written: to the dead-letter queue, or the task fails. */
export const reject = (reason) => ({ tag: 'reject', val: reason });

const TIMESTAMP_TYPES = ['no-timestamp-type', 'create-time', 'log-append-time'];

/** A typed array of `Type` over a column's bytes (copied first when the
 * column does not start at a multiple of the type's width). */
function column(Type, bytes, count) {
  const aligned = bytes.byteOffset % Type.BYTES_PER_ELEMENT === 0 ? bytes : bytes.slice();
  return new Type(aligned.buffer, aligned.byteOffset, count);
}

/** Each entry of a byte-strings column, as a view into its data
 * (`subarray`, no copy), or undefined where null. */
export function strings(col, count) {
  const ends = column(Uint32Array, col.offsets, count + 1);
  const { data, present } = col;
  const out = new Array(count);
  for (let i = 0; i < count; i++) {
    out[i] = present[i] ? data.subarray(ends[i], ends[i + 1]) : undefined;
  }
  return out;
}

/** The records of one `put`, column by column. */
export class Records {
  constructor(batch) {
    const n = batch.count;
    this.batch = batch;
    this.count = n;
    this.ids = column(BigUint64Array, batch.ids, n);
    /** Which of `batch.topics` each record comes from. */
    this.topicIndexes = column(Uint16Array, batch.topicIndexes, n);
    this.partitions = column(Int32Array, batch.partitions, n);
    this.offsets = column(BigInt64Array, batch.offsets, n);
    /** Milliseconds since the Unix epoch; -1n when there is none. */
    this.timestamps = column(BigInt64Array, batch.timestamps, n);
    this.deliveryCounts = column(Uint16Array, batch.deliveryCounts, n);
    /** When each record's acquisition lock runs out (ms since the Unix
     * epoch); -1n under a classic consumer group. */
    this.lockDeadlines = column(BigInt64Array, batch.lockDeadlines, n);
  }

  topics() {
    const { topics } = this.batch;
    return Array.from(this.topicIndexes, (i) => topics[i]);
  }

  keys() {
    return strings(this.batch.keys, this.count);
  }

  values() {
    return strings(this.batch.values, this.count);
  }

  timestampTypes() {
    return Array.from(this.batch.timestampTypes, (t) => TIMESTAMP_TYPES[t]);
  }

  /** Each record's headers as [key, value] pairs, in order. */
  headers() {
    const b = this.batch;
    const bounds = column(Uint32Array, b.headerOffsets, this.count + 1);
    const total = bounds[this.count];
    const decoder = new TextDecoder();
    const keys = strings(b.headerKeys, total).map((k) => decoder.decode(k));
    const values = strings(b.headerValues, total);
    const out = new Array(this.count);
    for (let i = 0; i < this.count; i++) {
      const pairs = [];
      for (let h = bounds[i]; h < bounds[i + 1]; h++) pairs.push([keys[h], values[h]]);
      out[i] = pairs;
    }
    return out;
  }

  /** One object per record, with the fields of the WIT's old sink-record. */
  *[Symbol.iterator]() {
    const [topics, keys, values, headers, types] = [
      this.topics(),
      this.keys(),
      this.values(),
      this.headers(),
      this.timestampTypes(),
    ];
    for (let i = 0; i < this.count; i++) {
      const deadline = this.lockDeadlines[i];
      yield {
        id: this.ids[i],
        topic: topics[i],
        partition: this.partitions[i],
        offset: this.offsets[i],
        timestamp: this.timestamps[i],
        timestampType: types[i],
        key: keys[i],
        value: values[i],
        headers: headers[i],
        deliveryCount: this.deliveryCounts[i],
        lockDeadline: deadline >= 0n ? deadline : undefined,
      };
    }
  }

  /** The batch's ids as ranges of consecutive ids: usually one. */
  idRanges() {
    return ranges(this.ids);
  }
}

/** Ids (BigInts, in order) as ranges of consecutive ids. */
export function ranges(ids) {
  const n = ids.length;
  if (n === 0) return [];
  if (ids[n - 1] - ids[0] === BigInt(n - 1)) {
    let consecutive = true;
    for (let i = 1; i < n && consecutive; i++) consecutive = ids[i] === ids[i - 1] + 1n;
    if (consecutive) return [{ first: ids[0], count: n }];
  }
  const out = [];
  for (let i = 0; i < n; i++) {
    const last = out[out.length - 1];
    if (last && last.first + BigInt(last.count) === ids[i]) last.count += 1;
    else out.push({ first: ids[i], count: 1 });
  }
  return out;
}

/** One outcome for all `count` records of the batch, with `settled` for
 * records held before. */
export function report(count, outcome, settled = []) {
  return { outcomes: count > 0 ? [{ count, outcome }] : [], settled };
}

/** One outcome per record, in the batch's order. */
export function reportEach(outcomes, settled = []) {
  const runs = [];
  for (const outcome of outcomes) {
    const last = runs[runs.length - 1];
    if (last && last.outcome.tag === outcome.tag && last.outcome.val === outcome.val) last.count += 1;
    else runs.push({ count: 1, outcome });
  }
  return { outcomes: runs, settled };
}

/** Settlements of held records, by id ranges (`Records.idRanges()`). */
export function settle(idRanges, outcome = ACCEPT) {
  return idRanges.map((ids) => ({ ids, outcome }));
}

/** The ids a scoped flush names (BigInts); undefined for `all`. */
export function scopeIds(scope) {
  if (scope.tag !== 'records') return undefined;
  const ids = [];
  for (const r of scope.val) for (let i = 0; i < r.count; i++) ids.push(r.first + BigInt(i));
  return ids;
}

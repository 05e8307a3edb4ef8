// javascript-sink: appends Kafka records as JSON lines to a file in a
// directory that the connector grants (`plugin.grant.fs.<name>.path`).
//
// The JavaScript twin of plugins/file-sink: `put` turns a batch into JSON
// lines in memory and holds every record; `flush` writes the buffer out,
// syncs the file and only then settles the held records as accepted. A crash
// before the sync means the host redelivers them, never that they are lost.
//
// componentize-js builds this module into a component of the world
// `sink-with-files` (wit/world.wit): the Spillway `sink` world plus WASI's
// filesystem, which JavaScript reaches only through these imports, since
// StarlingMonkey (the engine) has no file API of its own.
//
// How WIT looks from JS here: records are objects with camelCase fields,
// `list<u8>` is a Uint8Array, `option` is the value or undefined, s64 / u64
// are BigInts, variants are `{ tag, val }`, enums are strings, resources are
// classes, and an exported function that returns a `result` returns its ok
// value or throws its error value.

import { log as hostLog } from 'spillway:log/log@0.1.0';
import { getDirectories } from 'wasi:filesystem/preopens@0.2.12';
import { HOLD, ACCEPT, Records, report, settle } from '../../sdk/javascript/spillway.js';

const NAME = 'javascript-sink';
const VERSION = '0.1.0';

/** Every field a line can have, in the order it is written. */
const ALL_FIELDS = ['topic', 'partition', 'offset', 'timestamp', 'key', 'value', 'headers'];

const fatal = (message) => ({ tag: 'fatal', val: message });
const retriable = (message) => ({ tag: 'retriable', val: message });

/** The message of an error thrown by JS or by an imported WASI function. */
function describe(e) {
  const payload = e?.payload ?? e;
  return typeof payload === 'string' ? payload : (payload?.message ?? JSON.stringify(payload));
}

function parseFields(value) {
  if (value === undefined) return [...ALL_FIELDS];
  return value
    .split(',')
    .map((f) => f.trim())
    .filter((f) => f !== '');
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

/** `text` as UTF-8, in a buffer kept from one flush to the next: the
 * engine collects garbage late (StarlingMonkey is made for short-lived
 * instances), so a long-lived task allocates as little as it can. */
let scratch = new Uint8Array(1 << 20);
function encoded(text) {
  // At most 3 bytes per UTF-16 code unit.
  if (scratch.length < text.length * 3) scratch = new Uint8Array(text.length * 3);
  const { written } = encoder.encodeInto(text, scratch);
  return scratch.subarray(0, written);
}

/** A key, value or header value as file-sink writes it: UTF-8 text when it
 * is, else the array of its byte values; null stays null. */
function text(bytes) {
  if (bytes === undefined) return null;
  try {
    return utf8.decode(bytes);
  } catch {
    return Array.from(bytes);
  }
}

/** Each entry of a byte-strings column for a JSON line: `{ texts, quoted }`.
 * The usual column (all present, ASCII, nothing to escape) is decoded and
 * checked in two native calls over its whole data, then sliced, and the
 * line's glue writes the quotes (`quoted`); any other goes entry by entry,
 * as JSON texts. */
function jsonTexts(column, count) {
  const { data, present } = column;
  const ends = new Uint32Array(column.offsets.slice().buffer, 0, count + 1);
  const texts = new Array(count);
  let whole;
  try {
    whole = present.indexOf(0) === -1 ? utf8.decode(data) : undefined;
  } catch {
    whole = undefined;
  }
  if (whole !== undefined && whole.length === data.length && JSON.stringify(whole).length === whole.length + 2) {
    for (let i = 0; i < count; i++) texts[i] = whole.slice(ends[i], ends[i + 1]);
    return { texts, quoted: true };
  }
  for (let i = 0; i < count; i++) {
    texts[i] = present[i] ? JSON.stringify(text(data.subarray(ends[i], ends[i + 1]))) : 'null';
  }
  return { texts, quoted: false };
}

/** A typed array's numbers as decimal texts, in two native calls. */
function numbers(column) {
  return { texts: column.length === 0 ? [] : column.join(',').split(','), quoted: false };
}

/** How each field's texts are made from a batch, an array per field.
 * (StarlingMonkey interprets JavaScript, with no JIT: the work per record
 * is kept to a few array stores; decoding, escaping and joining run
 * natively over whole columns.) */
const COLUMNS = {
  topic: (r) => {
    const names = r.batch.topics.map((t) => JSON.stringify(t));
    const texts = names.length === 1 ? new Array(r.count).fill(names[0]) : Array.from(r.topicIndexes, (i) => names[i]);
    return { texts, quoted: false };
  },
  partition: (r) => numbers(r.partitions),
  offset: (r) => numbers(r.offsets),
  timestamp: (r) => numbers(r.timestamps),
  key: (r) => jsonTexts(r.batch.keys, r.count),
  value: (r) => jsonTexts(r.batch.values, r.count),
  headers: (r) => ({
    texts: r.headers().map((pairs) => {
      if (pairs.length === 0) return '{}';
      const o = Object.create(null);
      for (const [key, value] of pairs) o[key] = text(value);
      return JSON.stringify(o);
    }),
    quoted: false,
  }),
};

/** The batch as JSON lines: the texts of each record, with the glue before
 * each field (`{"topic":`, `,"value":"`, ...) and after the last, stored
 * into one array and joined once. */
function jsonLines(records, fields) {
  const columns = fields.map((f) => COLUMNS[f](records));
  const glue = fields.map((f, j) => {
    const open = j === 0 ? '{' : `${columns[j - 1].quoted ? '"' : ''},`;
    return `${open}${JSON.stringify(f)}:${columns[j].quoted ? '"' : ''}`;
  });
  const end = `${columns[columns.length - 1].quoted ? '"' : ''}}\n`;
  const texts = columns.map((c) => c.texts);
  const n = records.count;
  const m = columns.length;
  const pieces = new Array(n * (2 * m + 1));
  let k = 0;
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < m; j++) {
      pieces[k++] = glue[j];
      pieces[k++] = texts[j][i];
    }
    pieces[k++] = end;
  }
  return pieces.join('');
}

/** Opens `path` for writing (creating it) in the granted directory that
 * holds it: WASI opens files relative to a preopened directory. */
function openGranted(path) {
  const granted = getDirectories();
  let best;
  for (const [dir, dirPath] of granted) {
    const prefix = dirPath.endsWith('/') ? dirPath : `${dirPath}/`;
    if (path.startsWith(prefix) && (!best || prefix.length > best.prefix.length)) {
      best = { dir, prefix };
    }
  }
  if (!best) {
    const names = granted.map(([, p]) => p).join(', ') || 'none';
    throw fatal(`'${path}' is in no granted directory (granted: ${names}); grant one with plugin.grant.fs.<name>.path`);
  }
  const relative = path.slice(best.prefix.length);
  try {
    const file = best.dir.openAt({ symlinkFollow: true }, relative, { create: true }, { write: true });
    return { file, size: file.stat().size };
  } catch (e) {
    throw fatal(`cannot open '${path}': ${describe(e)}`);
  }
}

/** The one task this component instance serves (see the WIT: one instance
 * per task). */
let task;

export const plugin = {
  metadata() {
    return {
      name: NAME,
      version: VERSION,
      description: 'Appends records as JSON lines to a file in a granted directory (JavaScript).',
      config: [
        {
          name: 'file',
          type: 'string',
          defaultValue: undefined,
          documentation:
            "Absolute path of the output file; its directory must be granted with plugin.grant.fs.<name>.path. " +
            "`{task}` in it becomes the task's number; with tasks.max above 1 it must be there, so that " +
            'tasks write files of their own.',
          required: true,
          importance: 'high',
        },
        {
          name: 'fields',
          type: 'list',
          defaultValue: ALL_FIELDS.join(','),
          documentation: `Which fields each JSON line has, in this order: any of ${ALL_FIELDS.join(', ')}.`,
          required: false,
          importance: 'medium',
        },
      ],
    };
  },

  validate(config) {
    const values = new Map(config);
    const errors = [];
    const file = values.get('file') ?? '';
    if (file.endsWith('/')) {
      errors.push({ key: 'file', message: 'must name a file, not a directory' });
    }
    if (file !== '' && !file.startsWith('/')) {
      errors.push({ key: 'file', message: 'must be an absolute path inside a granted directory' });
    }
    // Each task writes at the end of the file it knows: two tasks must not
    // share one file.
    if (Number(values.get('tasks.max') ?? '1') > 1 && !file.includes('{task}')) {
      errors.push({ key: 'file', message: 'must contain {task} when tasks.max is above 1' });
    }
    const fields = parseFields(values.get('fields'));
    const unknown = fields.filter((f) => !ALL_FIELDS.includes(f));
    if (unknown.length > 0) {
      errors.push({ key: 'fields', message: `unknown field(s) ${unknown.join(', ')}; known: ${ALL_FIELDS.join(', ')}` });
    } else if (fields.length === 0) {
      errors.push({ key: 'fields', message: 'names no field' });
    }
    return errors;
  },
};

export const sinkTask = {
  start(config) {
    const values = new Map(config);
    const file = values.get('file');
    if (file === undefined) throw fatal("missing required key 'file'");
    const path = file.replaceAll('{task}', values.get('task.id') ?? '0');
    const fields = parseFields(values.get('fields'));
    const problems = plugin.validate(config);
    if (problems.length > 0) throw fatal(problems.map((p) => `${p.key}: ${p.message}`).join('; '));
    const { file: descriptor, size } = openGranted(path);
    task = {
      path,
      descriptor,
      // Where the next flush writes: the end of what is durably written.
      size,
      // `"name":` before each field's JSON text (with the comma between).
      fields,
      chunks: [], // one string per batch, written by flush
      held: [], // id ranges
      records: 0,
      batches: 0,
      putMs: 0,
      flushes: 0,
      flushMs: 0,
    };
    hostLog('info', `appending to ${path} at byte ${size} (fields: ${fields.join(',')})`);
  },

  put(batch) {
    if (!task) throw fatal('put before start');
    const started = performance.now();
    const records = new Records(batch);
    const n = records.count;
    if (n > 0) {
      // Column by column, then one string per line.
      task.chunks.push(jsonLines(records, task.fields));
      task.held.push(...records.idRanges());
      task.records += n;
      task.batches += 1;
    }
    task.putMs += performance.now() - started;
    return report(n, HOLD);
  },

  // One file holds every record, so any flush writes out the whole buffer
  // and settles every held record, whatever the scope named.
  flush(_scope) {
    if (!task || task.held.length === 0) return [];
    const started = performance.now();
    const bytes = encoded(task.chunks.join(''));
    try {
      // A failed write leaves the records held and `size` where it was, so
      // that the next try writes over any part written: nothing is
      // acknowledged that is not on disk, and nothing is written twice.
      let written = 0;
      while (written < bytes.length) {
        const n = task.descriptor.write(bytes.subarray(written), task.size + BigInt(written));
        written += Number(n);
      }
      task.descriptor.syncData();
    } catch (e) {
      throw retriable(`write to '${task.path}' failed: ${describe(e)}`);
    }
    task.size += BigInt(bytes.length);
    task.chunks = [];
    const settled = settle(task.held, ACCEPT);
    task.held = [];
    task.flushes += 1;
    task.flushMs += performance.now() - started;
    return settled;
  },

  stop() {
    if (!task) return;
    try {
      sinkTask.flush({ tag: 'all' });
    } catch (e) {
      hostLog('error', `final flush failed: ${describe(e?.val ?? e)}`);
    }
    const rate = task.putMs > 0 ? Math.round(task.records / (task.putMs / 1000)) : 0;
    hostLog(
      'info',
      `wrote ${task.records} records in ${task.batches} batches to ${task.path}; ` +
        `put ${task.putMs.toFixed(1)} ms in all (${rate} records/s), ` +
        `${task.flushes} flushes ${task.flushMs.toFixed(1)} ms`,
    );
    task.descriptor[Symbol.dispose]?.();
    task = undefined;
  },
};

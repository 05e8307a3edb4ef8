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

const NAME = 'javascript-sink';
const VERSION = '0.1.0';

/** Every field a line can have, in the order it is written. */
const ALL_FIELDS = ['topic', 'partition', 'offset', 'timestamp', 'key', 'value', 'headers'];

const HOLD = { tag: 'hold' };
const ACCEPT = { tag: 'accept' };

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

/** Keys, values and header values as UTF-8 text when they are, else as an
 * array of byte values (as file-sink writes them). */
function text(bytes) {
  if (bytes === undefined) return null;
  try {
    return utf8.decode(bytes);
  } catch {
    return Array.from(bytes);
  }
}

/** Each field's JSON text, taken from a record. Offsets and timestamps are
 * s64 (BigInt): their decimal text is exact. (Code here is written for
 * StarlingMonkey's interpreter, which has no JIT: indexed loops and string
 * building, no per-record objects or iterators: twice as fast as building
 * an object per record for JSON.stringify.) */
const WRITERS = {
  topic: (r) => JSON.stringify(r.topic),
  partition: (r) => String(r.partition),
  offset: (r) => r.offset.toString(),
  timestamp: (r) => r.timestamp.toString(),
  key: (r) => JSON.stringify(text(r.key)),
  value: (r) => JSON.stringify(text(r.value)),
  headers: (r) => {
    const headers = r.headers;
    if (headers.length === 0) return '{}';
    // A later header of the same key wins, as in file-sink.
    const o = Object.create(null);
    for (let i = 0; i < headers.length; i++) o[headers[i].key] = text(headers[i].value);
    return JSON.stringify(o);
  },
};

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
      prefixes: fields.map((f, i) => `${i === 0 ? '{' : ','}${JSON.stringify(f)}:`),
      writers: fields.map((f) => WRITERS[f]),
      chunks: [], // one string per batch, written by flush
      held: [],
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
    if (batch.length > 0) {
      const { prefixes, writers, held } = task;
      const n = writers.length;
      // The whole batch becomes one chunk of lines: no host call per record.
      let chunk = '';
      for (let i = 0; i < batch.length; i++) {
        const r = batch[i];
        for (let j = 0; j < n; j++) chunk += prefixes[j] + writers[j](r);
        chunk += '}\n';
        held.push(r.id);
      }
      task.chunks.push(chunk);
      task.records += batch.length;
      task.batches += 1;
    }
    task.putMs += performance.now() - started;
    return { outcomes: new Array(batch.length).fill(HOLD), settled: [] };
  },

  // One file holds every record, so any flush writes out the whole buffer
  // and settles every held record, whatever the scope named.
  flush(_scope) {
    if (!task || task.held.length === 0) return [];
    const started = performance.now();
    const bytes = encoder.encode(task.chunks.join(''));
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
    const settled = task.held.map((id) => ({ id, outcome: ACCEPT }));
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

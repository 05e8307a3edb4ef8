// javascript-redact: an example transform. It replaces the named fields of
// each record's value (a JSON object) with a fixed string, and can stamp
// each record with the build that transformed it. The twin of
// examples/rust/redact and examples/python/transform, key for key.
//
// A null value (a tombstone) passes on as it is; a value that is not a JSON
// object cannot be redacted and fails, to the dead-letter queue. Built for
// the contract's `transform` world (`node build.mjs OUT transform/transform.js
// transform`): the exports `plugin` and `transformation` below.

import { Records, fail, keep } from '../../../sdk/javascript/spillway.js';

const NAME = 'javascript-redact';
const VERSION = '0.1.0';

const KEYS = [
  { name: 'fields', type: 'list', defaultValue: undefined, documentation: 'The top-level fields of the value to redact.', required: true, importance: 'high' },
  { name: 'replacement', type: 'string', defaultValue: '****', documentation: "What a redacted field's value becomes.", required: false, importance: 'medium' },
  {
    name: 'lineage.field',
    type: 'string',
    defaultValue: '',
    documentation: "When set, a field of this name is added to each value, naming the transform's build (name/version).",
    required: false,
    importance: 'medium',
  },
];

function settings(config) {
  const given = new Map(config);
  return {
    fields: (given.get('fields') ?? '').split(',').map((f) => f.trim()).filter((f) => f),
    replacement: given.get('replacement') ?? '****',
    lineage: (given.get('lineage.field') ?? '').trim() || undefined,
  };
}

function errors(s) {
  return s.fields.length ? [] : [{ key: 'fields', message: 'name at least one field to redact' }];
}

export const plugin = {
  metadata() {
    return { name: NAME, version: VERSION, description: 'Redacts fields of JSON values (an example).', config: KEYS };
  },
  validate(config) {
    return errors(settings(config));
  },
};

let stage;
const decoder = new TextDecoder();
const encoder = new TextEncoder();

function one(record) {
  if (record.value === undefined) return keep(record);
  let value;
  try {
    value = JSON.parse(decoder.decode(record.value));
  } catch {
    value = undefined;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return fail('the value is not a JSON object');
  }
  for (const field of stage.fields) {
    if (field in value) value[field] = stage.replacement;
  }
  if (stage.lineage) value[stage.lineage] = `${NAME}/${VERSION}`;
  // The bytes are copied: the value view points into the batch.
  return keep(record, { value: encoder.encode(JSON.stringify(value)) });
}

export const transformation = {
  start(config) {
    const s = settings(config);
    const problems = errors(s);
    if (problems.length) throw { tag: 'fatal', val: problems.map((e) => `${e.key}: ${e.message}`).join('; ') };
    stage = s;
  },
  apply(batch) {
    return Array.from(new Records(batch), one);
  },
  stop() {},
};

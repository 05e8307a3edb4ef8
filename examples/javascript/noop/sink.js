// javascript-noop-sink: accepts every record and writes nothing.
//
// The smallest JavaScript sink, the twin of plugins/noop-sink: a template to
// start from, and the benchmarks' measure of what a `put` costs in
// JavaScript before any work (the batch crossing into the engine and the
// report coming back). Built with the same world as ../sink.js.

import { ACCEPT, report } from '../../../sdk/javascript/spillway.js';

export const plugin = {
  metadata() {
    return {
      name: 'javascript-noop-sink',
      version: '0.1.0',
      description: 'Accepts every record, writes nothing (JavaScript).',
      config: [],
    };
  },
  validate(_config) {
    return [];
  },
};

export const sinkTask = {
  start(_config) {},
  put(batch) {
    return report(batch.count, ACCEPT);
  },
  flush(_scope) {
    return [];
  },
  stop() {},
};

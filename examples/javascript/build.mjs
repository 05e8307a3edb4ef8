// Builds a JavaScript sink into a WebAssembly component with
// componentize-js (its Node API: the `jco componentize` command failed on
// this repository's WIT folder with "failed to get path metadata").
//
//   node build.mjs [OUTPUT.wasm [SOURCE.js [WORLD]]]   (or: npm run build -- ...)
//
// SOURCE.js is the plugin's module (default: sink.js here, javascript-sink;
// noop/sink.js is javascript-noop-sink; transform/transform.js the transform
// javascript-redact). WORLD is a world of wit/world.wit: sink-with-files
// (the default) or transform. Default output:
// target/example-plugins/javascript-sink.wasm at the repository's root.
// Does nothing when the output is newer than the source, build.mjs,
// package-lock.json, the SDK layer (sdk/javascript) and every WIT file it is
// built from.

import { componentize } from '@bytecodealliance/componentize-js';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');
const out = resolve(process.argv[2] ?? join(root, 'target/example-plugins/javascript-sink.wasm'));
const source = resolve(process.argv[3] ?? join(here, 'sink.js'));
const world = process.argv[4] ?? 'sink-with-files';
const name = basename(out, '.wasm');

/** Every file under `path` (or `path` itself). */
function files(path) {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path).flatMap((name) => files(join(path, name)));
}

// package-lock.json: a new componentize-js is a new build too.
const inputs = [
  source,
  fileURLToPath(import.meta.url),
  join(here, 'package-lock.json'),
  ...files(join(here, 'wit')),
  ...files(join(root, 'wit')),
  ...files(join(root, 'sdk', 'javascript')),
];
if (existsSync(out) && inputs.every((f) => statSync(f).mtimeMs < statSync(out).mtimeMs)) {
  console.error(`${name}: ${out} is up to date`);
  process.exit(0);
}

// One WIT folder that componentize-js can resolve: this example's world
// (wit/world.wit) with its WASI deps, plus the repository's contract
// (wit/connector.wit and the spillway:* packages in wit/deps) as deps, so
// that the contract is never copied into the repository twice.
const wit = mkdtempSync(join(tmpdir(), 'spillway-js-wit-'));
try {
  cpSync(join(here, 'wit'), wit, { recursive: true });
  mkdirSync(join(wit, 'deps', 'connector'), { recursive: true });
  cpSync(join(root, 'wit', 'connector.wit'), join(wit, 'deps', 'connector', 'connector.wit'));
  for (const dep of readdirSync(join(root, 'wit', 'deps'))) {
    cpSync(join(root, 'wit', 'deps', dep), join(wit, 'deps', dep), { recursive: true });
  }

  const started = performance.now();
  // The engine reads the source and the modules it imports from the working
  // directory's tree: the repository's, where sink.js finds the SDK layer
  // (sdk/javascript/spillway.js).
  process.chdir(root);
  const { component } = await componentize({
    sourcePath: source,
    witPath: wit,
    worldName: world,
    // The host links no wasi:http; stdio stays (uncaught errors go to stderr,
    // which the host keeps for failure reports), and so do clocks (the
    // put() timing) and random (Math.random), which grant nothing.
    disableFeatures: ['http', 'fetch-event'],
  });
  mkdirSync(dirname(out), { recursive: true });
  // Into a temporary file first, so that a failed write leaves no half file
  // that would look up to date.
  writeFileSync(`${out}.tmp`, component);
  renameSync(`${out}.tmp`, out);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.error(`${name}: built ${out} (${(component.length / 1e6).toFixed(1)} MB, ${seconds} s)`);
} finally {
  rmSync(wit, { recursive: true, force: true });
}

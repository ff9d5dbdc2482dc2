'use strict';
// The package's `prepare` script: npm runs it when the package is installed
// from a directory (`npm install /path/to/webhook_dedup/clients/node`, a
// `file:` dependency) and before `npm pack` and `npm publish`. It compiles
// src/ into dist/ with the TypeScript that package-lock.json pins.
//
// npm does not install a directory dependency's devDependencies, so in a
// fresh checkout there is no TypeScript here yet: it is installed first
// with `npm ci` in this directory (the lock file's exact versions, devDependencies
// included whatever the outer install omits; from npm's cache when it has
// them, so an `npm install --offline` works once the cache holds them).
// In a packed copy (a tarball: dist/ and no src/) there is nothing to do.

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
if (!fs.existsSync(path.join(root, 'src', 'index.ts'))) process.exit(0);

const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
if (!fs.existsSync(tsc)) {
  // the npm that runs this script (npm_execpath), else the one on PATH
  const [command, ...first] = process.env.npm_execpath
    ? [process.execPath, process.env.npm_execpath] : ['npm'];
  console.error('webhook-dedup: installing the pinned TypeScript to build dist/ (npm ci in clients/node)');
  execFileSync(command, [...first, 'ci', '--prefix', root, '--include=dev', '--ignore-scripts',
    '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'],
    // its stdout goes to stderr: `npm pack` prints the tarball's name on
    // stdout, and a caller reading that name must read nothing else
    { cwd: root, stdio: ['ignore', 2, 2] });
}
fs.rmSync(path.join(root, 'dist'), { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.json')], { cwd: root, stdio: ['ignore', 2, 2] });

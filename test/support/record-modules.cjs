// Preload (`node --require`) that lists every module a process loads, one resolved URL or path a
// line, in the file named by EGRESS_RECORD_MODULES: CommonJS requires through Module._resolveFilename,
// ES modules through a resolve hook on the loader thread (record-modules-hooks.mjs).
'use strict';
const { appendFileSync } = require('node:fs');
const Module = require('node:module');
const { pathToFileURL } = require('node:url');

const file = process.env.EGRESS_RECORD_MODULES;
if (file) {
  const resolveFilename = Module._resolveFilename;
  Module._resolveFilename = function recorded(...args) {
    const path = resolveFilename.apply(this, args);
    appendFileSync(file, `${path}\n`);
    return path;
  };
  Module.register(pathToFileURL(`${__dirname}/record-modules-hooks.mjs`), { data: { file } });
}

// The built package: both builds load through the exports map, export the same names, and
// carry types; the package has no runtime dependency (@opentelemetry/api is an optional peer).
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { describe, it } from "node:test";

import { packageRoot } from "./support.js";

const manifest = JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8"));

const api = [
  "InboxCancelledError", "InboxWorker", "MAX_ATTEMPTS_LIMIT", "MAX_DELAY_MS", "MAX_ERROR_LENGTH", "MAX_TEXT_LENGTH",
  "OutboxMessageError", "deadLetter", "defaultOutboxSchema", "defaultRetryPolicy", "defaultSchema", "encodeHeaders",
  "encodePayload", "enqueue", "fromMssql", "fromPg", "inboxSql", "outboxStatement", "resolveOptions",
  "resolveOutboxSchema", "retryAfter", "sanitize", "sanitizeError",
];

describe("the package", () => {
  it("imports as ESM through its name", async () => {
    const esm = await import("@alternayte/queuebox-inbox");
    assert.deepEqual(Object.keys(esm).sort(), api);
  });

  it("requires as CommonJS through its name", () => {
    const require = createRequire(import.meta.url);
    const cjs = require("@alternayte/queuebox-inbox");
    assert.deepEqual(Object.keys(cjs).filter((k) => k !== "__esModule").sort(), api);
    assert.equal(cjs.sanitize("password=x"), "password=[REDACTED]");
    assert.match(require.resolve("@alternayte/queuebox-inbox"), /dist[\\/]cjs[\\/]index\.js$/);
  });

  it("ships types for both builds", () => {
    for (const path of [manifest.exports["."].import.types, manifest.exports["."].require.types]) {
      assert.ok(existsSync(join(packageRoot, path)), path);
    }
  });

  it("has no runtime dependency; @opentelemetry/api is an optional peer, loaded only on demand", () => {
    assert.equal(manifest.dependencies, undefined);
    assert.deepEqual(Object.keys(manifest.peerDependencies ?? {}), ["@opentelemetry/api"]);
    assert.equal(manifest.peerDependenciesMeta?.["@opentelemetry/api"]?.optional, true);
    for (const file of ["dist/esm/index.js", "dist/esm/worker.js", "dist/esm/tracing.js", "dist/cjs/tracing.js"]) {
      const text = readFileSync(join(packageRoot, file), "utf8");
      // No static import or top-level require: the API is loaded by a guarded dynamic import.
      assert.doesNotMatch(text, /^\s*(?:import|export)\b[^\n]*["']@opentelemetry\/api["']|^(?:const|var|let)[^\n]*require\(["']@opentelemetry\/api["']\)/m, file);
    }
    for (const file of ["dist/esm/index.js", "dist/esm/worker.js", "dist/esm/pg.js", "dist/esm/mssql.js", "dist/cjs/pg.js", "dist/cjs/mssql.js", "dist/esm/outbox.js", "dist/cjs/outbox.js"]) {
      const text = readFileSync(join(packageRoot, file), "utf8");
      assert.doesNotMatch(text, /^\s*(?:import|export)\b[^\n]*["'](?:pg|mssql|tedious)["']|require\(["'](?:pg|mssql|tedious)["']\)/m, file);
    }
  });

  it("is under the Apache License 2.0, with its text in the package", () => {
    assert.equal(manifest.license, "Apache-2.0");
    assert.ok(manifest.files.includes("LICENSE"), `files lists LICENSE: ${manifest.files.join(", ")}`);
    assert.match(readFileSync(join(packageRoot, "LICENSE"), "utf8"), /Apache License\s+Version 2\.0, January 2004/);
  });

  it("runs on Node 20", () => {
    assert.equal(manifest.engines.node, ">=20");
  });
});

describe("clients/README.md", () => {
  it("states the Node version of package.json's engines", () => {
    const readme = readFileSync(join(packageRoot, "..", "README.md"), "utf8");
    const minimum = /^>=(\d+)$/.exec(manifest.engines.node)?.[1];
    assert.ok(minimum, `engines.node ${manifest.engines.node} is of the form >=N`);
    const row = readme.split("\n").find((line) => line.includes("`@alternayte/queuebox-inbox`"));
    assert.ok(row, "the table row of the TypeScript package");
    assert.match(row, new RegExp(`Node\\.js ${minimum} or later`));
    assert.ok(row.includes(JSON.stringify({ node: manifest.engines.node }).replace(/:/, ": ")), row);
    for (const other of readme.matchAll(/Node(?:\.js)? (\d+)(?:\+| or later)/g)) {
      assert.equal(other[1], minimum, `every "Node N or later" of clients/README.md says ${minimum}: ${other[0]}`);
    }
  });
});

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
  "InboxCancelledError", "InboxWorker", "MAX_ERROR_LENGTH", "deadLetter", "defaultRetryPolicy", "defaultSchema",
  "fromMssql", "fromPg", "inboxSql", "resolveOptions", "retryAfter", "sanitize", "sanitizeError",
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
    for (const file of ["dist/esm/index.js", "dist/esm/worker.js", "dist/esm/pg.js", "dist/esm/mssql.js", "dist/cjs/pg.js", "dist/cjs/mssql.js"]) {
      const text = readFileSync(join(packageRoot, file), "utf8");
      assert.doesNotMatch(text, /^\s*(?:import|export)\b[^\n]*["'](?:pg|mssql|tedious)["']|require\(["'](?:pg|mssql|tedious)["']\)/m, file);
    }
  });

  it("runs on Node 20", () => {
    assert.equal(manifest.engines.node, ">=20");
  });
});

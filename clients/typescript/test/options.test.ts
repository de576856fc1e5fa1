import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { defaultSchema, resolveOptions, retryAfter, type InboxOptions } from "../src/index.js";

describe("resolveOptions", () => {
  it("fills the documented defaults", () => {
    const resolved = resolveOptions({ source: "orders" });
    assert.equal(resolved.source, "orders");
    assert.equal(resolved.batchSize, 10);
    assert.equal(resolved.leaseMs, 30_000);
    assert.equal(resolved.maxConcurrency, 1);
    assert.equal(resolved.pollIntervalMs, 1000);
    assert.equal(resolved.shutdownGraceMs, 30_000);
    assert.equal(resolved.dialect, "postgresql");
    assert.deepEqual(resolved.schema, defaultSchema);
    assert.equal(resolved.logger, undefined);
    assert.equal(typeof resolved.retryPolicy, "function");
  });

  it("keeps the values it is given", () => {
    const policy = () => retryAfter(1);
    const logger = { info() {}, warn() {}, error() {} };
    const resolved = resolveOptions({
      source: "payments", batchSize: 3, leaseMs: 900, maxConcurrency: 4, pollIntervalMs: 0, shutdownGraceMs: 0,
      dialect: "sqlserver", schema: { ...defaultSchema, table: "qb_inbox" }, retryPolicy: policy, logger,
    });
    assert.equal(resolved.batchSize, 3);
    assert.equal(resolved.leaseMs, 900);
    assert.equal(resolved.maxConcurrency, 4);
    assert.equal(resolved.pollIntervalMs, 0);
    assert.equal(resolved.shutdownGraceMs, 0);
    assert.equal(resolved.dialect, "sqlserver");
    assert.equal(resolved.schema.table, "qb_inbox");
    assert.equal(resolved.retryPolicy, policy);
    assert.equal(resolved.logger, logger);
  });

  const invalid: { name: string; options: unknown; pattern: RegExp }[] = [
    { name: "no options", options: undefined, pattern: /options must be an object/ },
    { name: "no source", options: {}, pattern: /source must be a non-empty string/ },
    { name: "an empty source", options: { source: "" }, pattern: /source/ },
    { name: "a zero batch", options: { source: "o", batchSize: 0 }, pattern: /batchSize/ },
    { name: "a fractional batch", options: { source: "o", batchSize: 1.5 }, pattern: /batchSize/ },
    { name: "a batch above 500", options: { source: "o", batchSize: 501 }, pattern: /batchSize/ },
    { name: "a lease below 3 ms", options: { source: "o", leaseMs: 2 }, pattern: /leaseMs/ },
    { name: "a lease beyond an INT", options: { source: "o", leaseMs: 2 ** 31 }, pattern: /leaseMs/ },
    { name: "no concurrency", options: { source: "o", maxConcurrency: 0 }, pattern: /maxConcurrency/ },
    { name: "a negative poll interval", options: { source: "o", pollIntervalMs: -1 }, pattern: /pollIntervalMs/ },
    { name: "a negative grace", options: { source: "o", shutdownGraceMs: -1 }, pattern: /shutdownGraceMs/ },
    { name: "a string count", options: { source: "o", batchSize: "10" }, pattern: /batchSize/ },
    { name: "an unknown dialect", options: { source: "o", dialect: "mysql" }, pattern: /dialect/ },
    { name: "a bad schema name", options: { source: "o", schema: { ...defaultSchema, table: 'x"y' } }, pattern: /schema\.table/ },
    { name: "a policy that is not a function", options: { source: "o", retryPolicy: {} }, pattern: /retryPolicy/ },
    { name: "a logger without error", options: { source: "o", logger: { info() {}, warn() {} } }, pattern: /logger/ },
    { name: "a misspelt option", options: { source: "o", leaseMS: 100 }, pattern: /leaseMS is not an option/ },
  ];
  for (const c of invalid) {
    it(`refuses ${c.name}`, () => {
      assert.throws(() => resolveOptions(c.options as InboxOptions), (error: Error) => {
        assert.ok(error instanceof TypeError || error instanceof RangeError);
        assert.match(error.message, c.pattern);
        return true;
      });
    });
  }

  it("names every problem at once", () => {
    assert.throws(() => resolveOptions({ source: "", batchSize: 0, leaseMs: 1 }), /source.*batchSize.*leaseMs/);
  });
});

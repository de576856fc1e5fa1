// The worker against a real SQL Server, which these machines cannot run: the test skips unless
// QUEUEBOX_TEST_SQLSERVER_URL names a server (sqlserver://user:password@host:1433), where it
// creates a database, applies migrations/sqlserver, runs a worker and drops the database.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import mssql from "mssql";

import { InboxWorker, defaultRetryPolicy, fromMssql } from "../src/index.js";
import { repoRoot, waitFor, within } from "./support.js";

const serverUrl = process.env.QUEUEBOX_TEST_SQLSERVER_URL;
const skip = serverUrl ? false : "SQL Server cannot run on this machine; set QUEUEBOX_TEST_SQLSERVER_URL to run";

function config(database: string): mssql.config {
  const u = new URL(serverUrl!);
  return {
    server: u.hostname,
    port: u.port ? Number(u.port) : 1433,
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    database,
    requestTimeout: 30_000,
    pool: { max: 10 },
    options: { encrypt: false, trustServerCertificate: true },
  };
}

/** The SQL Server migrations, each split into its batches at lines that read GO. */
function migrationBatches(): string[] {
  const dir = join(repoRoot, "migrations", "sqlserver");
  return readdirSync(dir)
    .map((file) => ({ file, version: Number(/^V(\d+)__/.exec(file)?.[1]) }))
    .filter((m) => Number.isInteger(m.version))
    .sort((a, b) => a.version - b.version)
    .flatMap((m) => readFileSync(join(dir, m.file), "utf8").split(/^GO[ \t]*\r?$/m))
    .filter((batch) => batch.trim() !== "");
}

describe("InboxWorker on SQL Server", () => {
  it("runs the tutorial worker and dead-letters a failure", { skip }, async () => {
    const name = `qbts_${randomBytes(5).toString("hex")}`;
    const admin = await new mssql.ConnectionPool(config("master")).connect();
    await admin.request().batch(`CREATE DATABASE [${name}]`);
    const pool = await new mssql.ConnectionPool(config(name)).connect();
    try {
      for (const batch of migrationBatches()) {
        await pool.request().batch(batch);
      }
      await pool.request().batch("CREATE TABLE orders (id NVARCHAR(100) NOT NULL PRIMARY KEY, total INT NOT NULL)");
      for (const [key, payload] of [["order-1", { id: "order-1", total: 42 }], ["bad-1", { id: "bad-1", total: -1 }]] as const) {
        await pool.request()
          .input("key", key)
          .input("payload", JSON.stringify(payload))
          .query("INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, headers, consumption, state) VALUES ('orders', @key, @key, @payload, '{}', 'pull', 'pending')");
      }
      const worker = new InboxWorker(fromMssql(mssql, pool), {
        source: "orders", pollIntervalMs: 20, maxConcurrency: 2,
        retryPolicy: defaultRetryPolicy({ maxAttempts: 1, baseDelayMs: 20, jitter: 0 }),
      });
      const controller = new AbortController();
      const done = worker.run(async (message, tx) => {
        const order = message.payload as { id: string; total: number };
        if (order.total < 0) {
          throw new Error("negative total, password=hunter2");
        }
        await new mssql.Request(tx).input("id", order.id).input("total", order.total).query("INSERT INTO orders (id, total) VALUES (@id, @total)");
      }, controller.signal);
      const states = async () =>
        new Map((await pool.request().query("SELECT idempotency_key, state, attempt, last_error FROM inbox")).recordset
          .map((r) => [r.idempotency_key as string, r as { state: string; attempt: number; last_error: string | null }]));
      await waitFor("both rows decided", async () => {
        const s = await states();
        return s.get("order-1")?.state === "processed" && s.get("bad-1")?.state === "dead";
      }, 30_000);
      const s = await states();
      assert.equal(s.get("bad-1")!.attempt, 1);
      assert.equal(s.get("bad-1")!.last_error, "negative total, password=[REDACTED]");
      const orders = (await pool.request().query("SELECT id, total FROM orders")).recordset;
      assert.deepEqual(orders.map((o) => ({ id: o.id, total: o.total })), [{ id: "order-1", total: 42 }]);
      controller.abort();
      await within("the stop", done, 5000);
    } finally {
      await pool.close();
      await admin.request().batch(`ALTER DATABASE [${name}] SET SINGLE_USER WITH ROLLBACK IMMEDIATE; DROP DATABASE [${name}]`).catch(() => undefined);
      await admin.close();
    }
  });
});

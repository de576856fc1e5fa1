// examples/worker.mjs, the tutorial's worker for Node 20: run with `node` against a migrated
// database holding one pull row of the source `orders`, it stores the order, completes the row,
// prints the tutorial's lines, and exits 0 on SIGTERM.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { createOrders, insertRows, newDatabase, packageRoot, waitFor, type TestDatabase } from "./support.js";

describe("examples/worker.mjs", () => {
  let db: TestDatabase;
  before(async () => {
    db = await newDatabase("ts_worker_mjs");
    await createOrders(db.pool);
    await insertRows(db.pool, [{ key: "order-1001", payload: { id: "1001", total: 4200 } }]);
  });
  after(async () => {
    await db?.drop();
  });

  it(`runs on this Node (${process.version}) and completes a pull row`, async () => {
    const child = spawn(process.execPath, [join(packageRoot, "examples", "worker.mjs")], {
      cwd: packageRoot,
      env: { ...process.env, DATABASE_URL: db.url },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const exit = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    try {
      await waitFor("the worker to store the order and complete the row", async () => {
        if (child.exitCode !== null) {
          throw new Error(`the worker exited ${child.exitCode}: ${stderr}`);
        }
        const r = await db.pool.query(
          "SELECT (SELECT state FROM inbox WHERE idempotency_key = 'order-1001') AS state, (SELECT total FROM orders WHERE id = '1001') AS total");
        return r.rows[0].state === "processed" && r.rows[0].total === 4200;
      }, 30_000, 50);
      await waitFor("the worker's line for the order", () => stdout.includes("Stored the order order-1001."), 10_000);
    } finally {
      child.kill("SIGTERM");
    }
    assert.equal(await exit, 0, `exit code; stderr:\n${stderr}`);
    assert.equal(stdout, "Waiting for messages of the source 'orders'. Press Ctrl+C to stop.\nStored the order order-1001.\n");
  });
});

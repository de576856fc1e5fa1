// The lease's local deadline, tested through a proxy between a worker and PostgreSQL that
// freezes: it stops passing bytes without closing a connection, as a network partition does.
// The tests assert the guarantees, never a time: a handler's signal has aborted before another
// worker can take its row; no handler starts on a claim whose lease has run out; the accepted
// deliveries of one aggregate keep their order, duplicates included; every row is completed
// once, at attempt 0.
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";

import pg from "pg";

import { InboxCancelledError, type InboxMessage, type PgClient } from "../src/index.js";
import { FreezeProxy } from "./freezeproxy.js";
import { captureLogger, Gate, newDatabase, startWorker, untilAborted, waitFor, within, type RunningWorker, type TestDatabase } from "./support.js";

let db: TestDatabase;
let proxy: FreezeProxy;
let viaProxy: pg.Pool;
let workers: RunningWorker[];
let deliveries: string[]; // "worker key", in the order the deliveries were accepted
let violations: string[];

beforeEach(async (t) => {
  db = await newDatabase(t.name);
  await db.pool.query("CREATE TABLE writes (idempotency_key TEXT NOT NULL, worker TEXT NOT NULL)");
  const target = new URL(db.url);
  proxy = await FreezeProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
  const through = new URL(db.url);
  through.hostname = "127.0.0.1";
  through.port = String(proxy.port);
  viaProxy = new pg.Pool({ connectionString: through.toString(), max: 6 });
  viaProxy.on("error", () => undefined);
  workers = [];
  deliveries = [];
  violations = [];
});

afterEach(async () => {
  proxy.thaw();
  for (const w of workers) {
    w.stop();
  }
  await Promise.allSettled(workers.map((w) => within("the worker's stop", w.done, 30_000)));
  await viaProxy.end().catch(() => undefined);
  await proxy.close();
  await db.drop();
});

function run(...args: Parameters<typeof startWorker>): RunningWorker {
  const w = startWorker(...args);
  workers.push(w);
  return w;
}

/** Inserts due pull rows of the source orders, in order; each key is "aggregate/n". */
async function seed(...keys: string[]): Promise<void> {
  for (const key of keys) {
    await db.pool.query(
      `INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption, state, created_at, scheduled_at)
       VALUES ('orders', $1, $2, '{}', 'pull', 'pending', clock_timestamp(), clock_timestamp())`,
      [key, key.split("/")[0]],
    );
  }
}

/**
 * Records a violation when the row's lease, on the database's clock, has run out as its handler
 * starts: the worker handed the handler a claim that another worker may already hold. (It reads
 * the row's lease, whichever claim it belongs to: a test that relies on it keeps the worker from
 * claiming the row again while it holds it.)
 */
async function checkLeaseLive(worker: string, message: InboxMessage): Promise<void> {
  const result = await db.pool.query(
    "SELECT state = 'processing' AND lease_expires_at > clock_timestamp() AS live FROM inbox WHERE id = $1",
    [message.id],
  );
  if (result.rows[0]?.live !== true) {
    violations.push(`${worker} started the handler of ${message.idempotencyKey} on a lease that had run out`);
  }
}

/** Accepts a delivery of the message, as a destination would, unless the signal has aborted; writes its row in the handler's transaction. */
async function deliver(worker: string, message: InboxMessage, tx: PgClient, signal: AbortSignal): Promise<void> {
  await tx.query("INSERT INTO writes VALUES ($1, $2)", [message.idempotencyKey, worker]);
  if (signal.aborted) {
    throw signal.reason;
  }
  deliveries.push(`${worker} ${message.idempotencyKey}`);
}

async function processed(): Promise<boolean> {
  const result = await db.pool.query("SELECT count(*)::int AS n FROM inbox WHERE state <> 'processed'");
  return result.rows[0].n === 0;
}

/**
 * The guarantees: no violation was recorded; the accepted deliveries of each aggregate are in
 * order, counting every one, duplicates included; every row is processed once, at attempt 0 (a
 * handler cancelled by its deadline spends no attempt), with one committed write.
 */
async function check(keys: string[]): Promise<void> {
  assert.deepEqual(violations, []);
  const last = new Map<string, number>();
  for (const delivery of deliveries) {
    const key = delivery.split(" ")[1]!;
    const aggregate = key.split("/")[0]!;
    const position = keys.indexOf(key);
    const before = last.get(aggregate) ?? -1;
    assert.ok(position >= before, `order violation: "${delivery}" was accepted after "${keys[before]}" of its aggregate; deliveries: ${JSON.stringify(deliveries)}`);
    last.set(aggregate, Math.max(before, position));
  }
  const rows = await db.pool.query(
    `SELECT i.idempotency_key AS key, i.state, i.attempt, i.last_error,
            (SELECT count(*)::int FROM writes w WHERE w.idempotency_key = i.idempotency_key) AS writes
     FROM inbox i ORDER BY i.idempotency_key`,
  );
  for (const row of rows.rows) {
    assert.deepEqual(
      { key: row.key, state: row.state, attempt: row.attempt, lastError: row.last_error, writes: row.writes },
      { key: row.key, state: "processed", attempt: 0, lastError: null, writes: 1 },
    );
  }
}

describe("the lease's local deadline", () => {
  it("aborts a cut-off worker's handler before another worker can take its row, and keeps the order of deliveries", async () => {
    // Worker A, behind the proxy, holds k1/1 in a slow delivery (it waits for its signal, or for
    // the test to let it through) and has claimed m1/1 of another aggregate ahead. The proxy
    // freezes: A's renewals cannot reach the database. Worker B, connected directly, takes the
    // rows once A's leases have run out.
    const keys = ["k1/1", "k1/2", "k1/3", "m1/1", "m1/2"];
    await seed(...keys);
    let aSignal: AbortSignal | undefined;
    let aRuns = 0;
    const aStarted = new Gate();
    const letThrough = new Gate();
    run(viaProxy, { source: "orders", leaseMs: 3000, pollIntervalMs: 20, shutdownGraceMs: 100 }, async (message, tx, signal) => {
      await checkLeaseLive("A", message);
      aRuns++;
      if (aRuns === 1) {
        if (message.idempotencyKey !== "k1/1") {
          violations.push(`A's first handler is ${message.idempotencyKey}, want k1/1`);
        }
        aSignal = signal;
        aStarted.open();
        await letThrough.wait(signal); // a slow delivery
      }
      await deliver("A", message, tx, signal);
    });
    await within("A's handler of k1/1 starts", aStarted.wait(), 30_000);
    await waitFor("A holds k1/1 and m1/1", async () => {
      const result = await db.pool.query("SELECT count(*)::int AS n FROM inbox WHERE state = 'processing' AND idempotency_key IN ('k1/1', 'm1/1')");
      return result.rows[0].n === 2;
    });
    proxy.freeze();

    const b = run(db.pool, { source: "orders", leaseMs: 3000, pollIntervalMs: 20 }, async (message, tx, signal) => {
      await checkLeaseLive("B", message);
      if (message.idempotencyKey === "k1/1" && aSignal?.aborted !== true) {
        violations.push("B took k1/1 while A's handler signal had not aborted");
      }
      await deliver("B", message, tx, signal);
    });
    await waitFor("B processes every row", processed, 60_000);
    b.stop();
    await within("B's stop", b.done, 30_000);

    // The partition heals; A's slow delivery, if it still runs, goes through.
    letThrough.open();
    proxy.thaw();
    const a = workers[0]!;
    a.stop();
    await within("A's stop", a.done, 30_000);
    assert.equal(aRuns, 1, "A must start no handler on rows whose deadline passed while it was cut off");
    await check(keys);
  });

  it("does not hand the handler a claim whose answer came after the deadline", async () => {
    // The database runs and commits the claim, but the proxy holds its answer back until the
    // lease has run out. One row held at a time: the worker claims nothing more while it holds
    // the row, so the lease that the handler finds is the one of the claim it was handed.
    const key = "late/claim-answer-7d1c5e";
    await seed(key);
    proxy.freezeOnReply(key);
    run(viaProxy, { source: "orders", leaseMs: 3000, batchSize: 1, pollIntervalMs: 20 }, async (message, tx, signal) => {
      await checkLeaseLive("A", message);
      await deliver("A", message, tx, signal);
    });
    await waitFor("the proxy holds the answer of the claim", () => proxy.frozen, 30_000);
    await waitFor("the lease runs out on the database's clock", async () => {
      const result = await db.pool.query("SELECT lease_expires_at <= clock_timestamp() AS expired FROM inbox WHERE idempotency_key = $1", [key]);
      return result.rows[0].expired === true;
    }, 30_000);
    proxy.thaw();
    await waitFor("the row is processed", processed, 30_000);
    await check([key]);
  });

  it("commits nothing after the deadline", async () => {
    // The completion reaches the database in time, but its answer reaches the worker only after
    // the lease has run out on the database's clock (the proxy holds it back). The worker must
    // not send COMMIT then: that run's write and completion roll back, and the row runs again
    // and is completed once, at attempt 0. One row held at a time: the worker claims the row
    // again only once the first run is over.
    const key = "late/commit-4b9e21";
    await seed(key);
    const id = (await db.pool.query("SELECT id::text AS id FROM inbox WHERE idempotency_key = $1", [key])).rows[0].id as string;
    // The first statement that sends the row's id is the completion (the handler returns well
    // before the first renewal).
    proxy.freezeAfterRequest(id);
    let runs = 0;
    run(viaProxy, { source: "orders", leaseMs: 3000, batchSize: 1, pollIntervalMs: 20 }, async (message, tx, signal) => {
      runs++;
      await deliver(`A#${runs}`, message, tx, signal);
    });
    await waitFor("the proxy holds the answer of the completion", () => proxy.frozen, 30_000);
    await waitFor("the lease runs out on the database's clock", async () => {
      const result = await db.pool.query("SELECT lease_expires_at <= clock_timestamp() AS expired FROM inbox WHERE idempotency_key = $1", [key]);
      return result.rows[0].expired === true;
    }, 30_000);
    proxy.thaw();
    await waitFor("the row is processed", processed, 30_000);
    const first = await db.pool.query("SELECT count(*)::int AS n FROM writes WHERE worker = 'A#1'");
    assert.equal(first.rows[0].n, 0, "the first run committed after its lease had run out");
    await check([key]);
  });
});

/** The password in the error of a refused renewal: no log line may show it. */
const RENEWAL_SECRET = "hunter2";

/**
 * Makes PostgreSQL refuse every lease renewal of the inbox with an error: an update that keeps a
 * row processing under the same claim token and moves its lease_expires_at. The claim and the
 * completion, retry and dead statements pass.
 */
async function refuseRenewals(): Promise<void> {
  await db.pool.query(`
    CREATE FUNCTION qb_test_refuse_renewal() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'lease renewal refused by the test (password=${RENEWAL_SECRET})';
    END $$;
    CREATE TRIGGER qb_test_refuse_renewal BEFORE UPDATE ON inbox FOR EACH ROW
    WHEN (OLD.state = 'processing' AND NEW.state = 'processing'
          AND OLD.claim_token IS NOT DISTINCT FROM NEW.claim_token
          AND NEW.lease_expires_at IS DISTINCT FROM OLD.lease_expires_at)
    EXECUTE FUNCTION qb_test_refuse_renewal();`);
}

describe("a lease renewal that fails", () => {
  // A renewal that fails with an error, rather than changing no row, also loses the lease: the
  // handler's signal aborts at once (not at the local deadline), its writes roll back, nothing
  // is written to the row (no attempt spent, even though the database still answers in the
  // first case), and the failure is logged once, redacted. The first renewal runs a third of the
  // lease after the claim; the local deadline comes at four fifths of it.
  const failures: [string, () => Promise<void>][] = [
    ["the database refuses the renewal", refuseRenewals],
    ["the database cannot be reached", () => proxy.close()],
  ];
  for (const [name, fail] of failures) {
    it(`aborts the handler at once: ${name}`, async () => {
      const key = "renewal/fails";
      await seed(key);
      const logger = captureLogger();
      const started = new Gate();
      const ended = new Gate();
      let reason: unknown;
      const w = run(viaProxy, { source: "orders", leaseMs: 6000, batchSize: 1, pollIntervalMs: 20, logger }, async (message, tx, signal) => {
        await tx.query("INSERT INTO writes VALUES ($1, 'A')", [message.idempotencyKey]);
        const first = !started.isOpen;
        started.open();
        try {
          await untilAborted(signal);
        } catch (error) {
          if (first) {
            reason = error;
            ended.open();
          }
          throw error;
        }
      });
      await within("the handler starts", started.wait(), 30_000);
      await fail();
      await within("the handler's signal aborts", ended.wait(), 60_000);
      w.stop();
      await within("the worker's stop", w.done, 30_000);

      assert.ok(reason instanceof InboxCancelledError);
      assert.equal(reason.cancelReason, "lease-lost");
      const lost = logger.lines.filter((l) => l.message.startsWith("the lease was lost:"));
      assert.deepEqual(
        lost.map((l) => l.message),
        ["the lease was lost: the renewal failed; cancelling the handler"],
        `the failed renewal, not the local deadline, must lose the lease, once:\n${logger.text()}`,
      );
      assert.equal(lost[0]!.level, "warn");
      assert.ok(String(lost[0]!.fields.error ?? "") !== "", "the line carries the renewal's error");
      assert.doesNotMatch(logger.text(), new RegExp(RENEWAL_SECRET), "a log line shows the password of the renewal's error");
      const row = await db.pool.query(
        "SELECT state, attempt, last_error, (SELECT count(*)::int FROM writes) AS writes FROM inbox WHERE idempotency_key = $1",
        [key],
      );
      assert.deepEqual(
        { state: row.rows[0].state, attempt: row.rows[0].attempt, lastError: row.rows[0].last_error, writes: row.rows[0].writes },
        { state: "processing", attempt: 0, lastError: null, writes: 0 },
      );
    });
  }
});

// The worker against the real PostgreSQL: each test gets a fresh migrated database.
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";

import {
  InboxCancelledError,
  InboxWorker,
  deadLetter,
  defaultRetryPolicy,
  defaultSchema,
  fromPg,
  retryAfter,
  type InboxConnection,
  type InboxMessage,
  type InboxRetryPolicy,
  type PgClient,
} from "../src/index.js";
import {
  Gate,
  captureLogger,
  createOrders,
  insertRows,
  newDatabase,
  readRows,
  sleep,
  startWorker,
  untilAborted,
  waitFor,
  within,
  type RunningWorker,
  type TestDatabase,
} from "./support.js";

let db: TestDatabase;
let workers: RunningWorker[];

beforeEach(async (t) => {
  db = await newDatabase(t.name);
  workers = [];
  await createOrders(db.pool);
});

afterEach(async () => {
  for (const w of workers) {
    w.stop();
  }
  await Promise.allSettled(workers.map((w) => within("the worker's stop", w.done, 10_000)));
  await db.drop();
});

function run(...args: Parameters<typeof startWorker>): RunningWorker {
  const w = startWorker(...args);
  workers.push(w);
  return w;
}

async function stateOf(key: string) {
  return (await readRows(db.pool)).get(key);
}

async function orders(): Promise<{ id: string; total: number }[]> {
  return (await db.pool.query("SELECT id, total FROM orders ORDER BY id")).rows;
}

/** The handler of the tutorial: one orders row per message, through the handler's transaction. */
async function insertOrder(message: InboxMessage, tx: PgClient): Promise<void> {
  const order = message.payload as { id: string; total: number };
  await tx.query("INSERT INTO orders (id, total) VALUES ($1, $2)", [order.id, order.total]);
}

describe("InboxWorker on PostgreSQL", () => {
  it("the tutorial worker: the orders row and the completion commit together", async () => {
    await insertRows(db.pool, [{
      key: "order-1", aggregate: "customer-7", eventType: "order.created", correlationId: "corr-1",
      headers: { "content-type": "application/json" }, payload: { id: "order-1", total: 42 },
    }]);
    const seen: InboxMessage[] = [];
    const tokens: (string | null)[] = [];
    const w = run(db.pool, { source: "orders", pollIntervalMs: 20 }, async (message, tx) => {
      seen.push(message);
      tokens.push((await stateOf("order-1"))!.token);
      await insertOrder(message, tx);
    });
    await waitFor("order-1 processed", async () => (await stateOf("order-1"))?.state === "processed");
    assert.deepEqual(await orders(), [{ id: "order-1", total: 42 }]);
    const row = (await stateOf("order-1"))!;
    assert.deepEqual([row.attempt, row.lastError, row.token], [0, null, null]);

    assert.equal(seen.length, 1);
    const message = seen[0]!;
    assert.deepEqual(Object.keys(message).sort(), [
      "aggregateId", "attempt", "correlationId", "eventType", "headers", "id", "idempotencyKey", "payload", "source",
    ]);
    assert.deepEqual({ ...message, id: undefined }, {
      id: undefined, source: "orders", idempotencyKey: "order-1", aggregateId: "customer-7", eventType: "order.created",
      payload: { id: "order-1", total: 42 }, headers: { "content-type": "application/json" }, attempt: 0, correlationId: "corr-1",
    });
    assert.match(message.id, /^[0-9a-f-]{36}$/);
    assert.ok(Object.isFrozen(message) && Object.isFrozen(message.headers));
    // The handler never sees the claim token.
    assert.ok(tokens[0]);
    assert.ok(!JSON.stringify(message).includes(tokens[0]!), "the message holds the claim token");

    w.stop();
    await within("the stop", w.done, 5000);
  });

  it("a failing handler leaves no business row, retries with backoff, then goes dead", async () => {
    await insertRows(db.pool, [{ key: "m1", aggregate: "customer-1", payload: { id: "order-9", total: 9 } }]);
    const logger = captureLogger();
    const runs: { attempt: number; start: number; end: number }[] = [];
    run(db.pool, {
      source: "orders", pollIntervalMs: 20, logger,
      retryPolicy: defaultRetryPolicy({ maxAttempts: 2, baseDelayMs: 100, maxDelayMs: 1000, jitter: 0 }),
    }, async (message, tx) => {
      const start = performance.now();
      await insertOrder(message, tx);
      runs.push({ attempt: message.attempt, start, end: performance.now() });
      throw new Error("payment service rejected the call: password=hunter2");
    });
    await waitFor("m1 dead", async () => (await stateOf("m1"))?.state === "dead", 15_000);
    const row = (await stateOf("m1"))!;
    assert.equal(row.attempt, 2);
    assert.equal(row.lastError, "payment service rejected the call: password=[REDACTED]");
    assert.equal(row.token, null);
    assert.deepEqual(await orders(), []);
    assert.deepEqual(runs.map((r) => r.attempt), [0, 1, 2]);
    assert.ok(runs[1]!.start - runs[0]!.end >= 100, `first gap ${runs[1]!.start - runs[0]!.end} ms`);
    assert.ok(runs[2]!.start - runs[1]!.end >= 200, `second gap ${runs[2]!.start - runs[1]!.end} ms`);
    const text = logger.text();
    assert.match(text, /password=\[REDACTED\]/);
    assert.doesNotMatch(text, /hunter2/);
    assert.match(text, /the message is dead/);
  });

  it("a custom policy dead-letters a JSON syntax error at once and retries the rest", async () => {
    await insertRows(db.pool, [
      { key: "bad-json", aggregate: "a1", payload: { raw: "{not json" } },
      { key: "plain-failure", aggregate: "a2", payload: { raw: "{}" } },
    ]);
    const retryPolicy: InboxRetryPolicy = (message, failure) => {
      if (failure instanceof SyntaxError) {
        return deadLetter();
      }
      return message.attempt >= 5 ? deadLetter() : retryAfter(60_000);
    };
    const runs: string[] = [];
    run(db.pool, { source: "orders", pollIntervalMs: 20, maxConcurrency: 2, retryPolicy }, async (message) => {
      runs.push(message.idempotencyKey);
      JSON.parse((message.payload as { raw: string }).raw);
      throw new Error("downstream unavailable");
    });
    await waitFor("both rows decided", async () => {
      const rows = await readRows(db.pool);
      return rows.get("bad-json")?.state === "dead" && rows.get("plain-failure")?.state === "pending" && rows.get("plain-failure")?.attempt === 1;
    });
    const rows = await readRows(db.pool);
    assert.equal(rows.get("bad-json")!.attempt, 0);
    assert.match(rows.get("bad-json")!.lastError!, /JSON/);
    assert.equal(rows.get("plain-failure")!.lastError, "downstream unavailable");
    assert.deepEqual(runs.sort(), ["bad-json", "plain-failure"]);
  });

  it("a handler past its lease loses it: the signal aborts and its writes roll back", async () => {
    await insertRows(db.pool, [{ key: "m1", aggregate: "customer-5", payload: { id: "order-5", total: 5 } }]);
    // Renewals cannot reach the database, so the lease runs out under the handler.
    const base = fromPg(db.pool);
    const noRenewals: InboxConnection<PgClient> = {
      ...base,
      execute: (statement, values) =>
        statement.name === "renew" ? Promise.reject(new Error("renewing: connect ECONNREFUSED")) : base.execute(statement, values),
    };
    const logger = captureLogger();
    let reason: unknown;
    const started = performance.now();
    let cancelledAfter = 0;
    const w1 = run(noRenewals, { source: "orders", leaseMs: 600, pollIntervalMs: 20, logger }, async (message, tx, signal) => {
      await insertOrder(message, tx);
      try {
        await untilAborted(signal);
      } catch (error) {
        reason = error;
        cancelledAfter = performance.now() - started;
        throw error;
      }
    });
    await waitFor("the handler cancelled", () => reason !== undefined, 5000);
    assert.ok(reason instanceof InboxCancelledError);
    assert.equal(reason.cancelReason, "lease-lost");
    assert.equal(reason.name, "AbortError");
    assert.ok(cancelledAfter < 5000, `cancelled after ${cancelledAfter} ms`);
    // Nothing was written to the row and the handler's write rolled back.
    await waitFor("the rollback", async () => (await orders()).length === 0 && (await db.pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'")).rows[0].n === 0);
    const row = (await stateOf("m1"))!;
    assert.deepEqual([row.state, row.attempt, row.lastError], ["processing", 0, null]);
    assert.match(logger.text(), /the lease was lost/);
    w1.stop();
    await within("w1's stop", w1.done, 5000);

    // Another worker takes the expired row with a new token and completes it.
    const oldToken = row.token;
    run(db.pool, { source: "orders", pollIntervalMs: 20 }, insertOrder);
    await waitFor("m1 processed", async () => (await stateOf("m1"))?.state === "processed");
    assert.deepEqual(await orders(), [{ id: "order-5", total: 5 }]);
    assert.equal((await stateOf("m1"))!.attempt, 0);
    assert.ok(oldToken);
  });

  it("a completion that changes no row rolls the handler's writes back", async () => {
    await insertRows(db.pool, [{ key: "m1", aggregate: "customer-6", payload: { id: "order-6", total: 6 } }]);
    const logger = captureLogger();
    let handled = false;
    run(db.pool, { source: "orders", pollIntervalMs: 20, logger }, async (message, tx) => {
      await insertOrder(message, tx);
      // Another worker has taken the row meanwhile: it holds a new token.
      await db.pool.query("UPDATE inbox SET claim_token = gen_random_uuid() WHERE idempotency_key = 'm1'");
      handled = true;
    });
    await waitFor("the handler", () => handled);
    await waitFor("the lost-lease log line", () => /the completion changed no row/.test(logger.text()));
    assert.deepEqual(await orders(), []);
    const row = (await stateOf("m1"))!;
    assert.deepEqual([row.state, row.attempt, row.lastError], ["processing", 0, null]);
  });

  it("renews the lease of a handler that runs longer than the lease", async () => {
    await insertRows(db.pool, [{ key: "long-1", aggregate: "customer-2", payload: { id: "order-2", total: 2 } }]);
    const tokens: string[] = [];
    const handler = async (message: InboxMessage, tx: PgClient, signal: AbortSignal) => {
      tokens.push((await stateOf("long-1"))!.token!);
      await sleep(4500, signal);
      await insertOrder(message, tx);
    };
    // A lease of seconds (renewed every second): a renewal that a loaded machine delays still
    // finds its claim; the handler outlives the lease by half of it.
    run(db.pool, { source: "orders", leaseMs: 3000, pollIntervalMs: 20 }, handler);
    run(db.pool, { source: "orders", leaseMs: 3000, pollIntervalMs: 20 }, handler);
    await waitFor("long-1 processed", async () => (await stateOf("long-1"))?.state === "processed", 30_000);
    assert.equal(tokens.length, 1, "the row ran more than once");
    assert.deepEqual(await orders(), [{ id: "order-2", total: 2 }]);
  });

  it("two workers on one source run two aggregates at once but never one aggregate twice", async () => {
    await insertRows(db.pool, ["a1", "a2", "a3", "b1", "b2", "b3"].map((key) => ({ key, aggregate: key[0]!.toUpperCase() })));
    const gate = new Gate();
    const running = new Map<string, number>();
    let maxPerAggregate = 0;
    let bothAtOnce = false;
    const order: string[] = [];
    const handler = async (message: InboxMessage, _tx: PgClient, signal: AbortSignal) => {
      const aggregate = message.aggregateId!;
      running.set(aggregate, (running.get(aggregate) ?? 0) + 1);
      maxPerAggregate = Math.max(maxPerAggregate, running.get(aggregate)!);
      bothAtOnce ||= (running.get("A") ?? 0) > 0 && (running.get("B") ?? 0) > 0;
      order.push(message.idempotencyKey);
      try {
        await gate.wait(signal);
        await sleep(10, signal);
      } finally {
        running.set(aggregate, running.get(aggregate)! - 1);
      }
    };
    run(db.pool, { source: "orders", batchSize: 1, pollIntervalMs: 20 }, handler);
    run(db.pool, { source: "orders", batchSize: 1, pollIntervalMs: 20 }, handler);
    await waitFor("a1 and b1 running at once", () => bothAtOnce);
    const rows = await readRows(db.pool);
    for (const key of ["a2", "a3", "b2", "b3"]) {
      assert.equal(rows.get(key)!.state, "pending", key);
    }
    gate.open();
    await waitFor("every row processed", async () => [...(await readRows(db.pool)).values()].every((r) => r.state === "processed"), 15_000);
    assert.equal(maxPerAggregate, 1);
    assert.deepEqual(order.filter((k) => k.startsWith("a")), ["a1", "a2", "a3"]);
    assert.deepEqual(order.filter((k) => k.startsWith("b")), ["b1", "b2", "b3"]);
  });

  it("many workers with concurrency keep one message per aggregate in flight and the order of each aggregate", async () => {
    const aggregates = ["A", "B", "C", "D", "E"];
    const seeds = [];
    for (let i = 1; i <= 6; i++) {
      for (const a of aggregates) {
        seeds.push({ key: `${a}-${i}`, aggregate: a, payload: { id: `${a}-${i}`, total: i } });
      }
    }
    for (let i = 1; i <= 5; i++) {
      seeds.push({ key: `free-${i}`, aggregate: null, payload: { id: `free-${i}`, total: 0 } });
    }
    await insertRows(db.pool, seeds);
    const running = new Map<string, number>();
    let maxPerAggregate = 0;
    let maxOverall = 0;
    let inFlight = 0;
    const order = new Map<string, string[]>();
    const handler = async (message: InboxMessage, tx: PgClient, signal: AbortSignal) => {
      const aggregate = message.aggregateId ?? message.idempotencyKey;
      running.set(aggregate, (running.get(aggregate) ?? 0) + 1);
      maxPerAggregate = Math.max(maxPerAggregate, running.get(aggregate)!);
      inFlight++;
      maxOverall = Math.max(maxOverall, inFlight);
      order.set(aggregate, [...(order.get(aggregate) ?? []), message.idempotencyKey]);
      try {
        await sleep(Math.floor(Math.random() * 15), signal);
        await insertOrder(message, tx);
      } finally {
        inFlight--;
        running.set(aggregate, running.get(aggregate)! - 1);
      }
    };
    for (let i = 0; i < 4; i++) {
      run(db.pool, { source: "orders", batchSize: 3, maxConcurrency: 3, pollIntervalMs: 10 }, handler);
    }
    await waitFor("every row processed", async () => [...(await readRows(db.pool)).values()].every((r) => r.state === "processed"), 30_000);
    assert.equal(maxPerAggregate, 1);
    assert.ok(maxOverall > 1, "no two handlers ever ran at once");
    for (const a of aggregates) {
      assert.deepEqual(order.get(a), [1, 2, 3, 4, 5, 6].map((i) => `${a}-${i}`));
    }
    assert.equal((await orders()).length, seeds.length, "a message ran twice or not at all");
    assert.equal([...order.values()].flat().length, seeds.length);
  });

  it("a busy aggregate on one source does not block the same aggregate on another source", async () => {
    await insertRows(db.pool, [
      { key: "o1", source: "orders", aggregate: "A" },
      { key: "o2", source: "orders", aggregate: "A" },
      { key: "p1", source: "payments", aggregate: "A" },
    ]);
    const gate = new Gate();
    let o1Running = false;
    run(db.pool, { source: "orders", pollIntervalMs: 20 }, async (message, _tx, signal) => {
      o1Running = message.idempotencyKey === "o1";
      await gate.wait(signal);
    });
    await waitFor("o1 running", () => o1Running);
    const payments: string[] = [];
    run(db.pool, { source: "payments", pollIntervalMs: 20 }, async (message) => {
      payments.push(message.idempotencyKey);
    });
    await waitFor("p1 processed", async () => (await stateOf("p1"))?.state === "processed");
    assert.deepEqual(payments, ["p1"]);
    assert.equal((await stateOf("o1"))!.state, "processing");
    assert.equal((await stateOf("o2"))!.state, "pending");
    gate.open();
    await waitFor("o1 and o2 processed", async () => {
      const rows = await readRows(db.pool);
      return rows.get("o1")!.state === "processed" && rows.get("o2")!.state === "processed";
    });
  });

  it("a stop with a slow handler cancels it after the grace and spends no attempt", async () => {
    await insertRows(db.pool, [{ key: "m1", aggregate: "customer-3", payload: { id: "order-3", total: 3 } }]);
    let reason: unknown;
    let running = false;
    const w1 = run(db.pool, { source: "orders", leaseMs: 3000, shutdownGraceMs: 300, pollIntervalMs: 20 }, async (message, tx, signal) => {
      await insertOrder(message, tx);
      running = true;
      try {
        await untilAborted(signal);
      } catch (error) {
        reason = error;
        throw error;
      }
    });
    await waitFor("the handler running", () => running);
    const stoppedAt = performance.now();
    w1.stop();
    await within("the stop", w1.done, 5000);
    const took = performance.now() - stoppedAt;
    assert.ok(took >= 290, `run returned ${took} ms after the stop, before the grace`);
    assert.ok(reason instanceof InboxCancelledError && reason.cancelReason === "shutdown");
    const row = (await stateOf("m1"))!;
    assert.deepEqual([row.state, row.attempt, row.lastError], ["processing", 0, null]);
    assert.deepEqual(await orders(), []);

    run(db.pool, { source: "orders", pollIntervalMs: 20 }, insertOrder);
    await waitFor("m1 processed by another worker", async () => (await stateOf("m1"))?.state === "processed", 20_000);
    assert.equal((await stateOf("m1"))!.attempt, 0);
    assert.deepEqual(await orders(), [{ id: "order-3", total: 3 }]);
  });

  it("a stop lets a running handler finish within the grace and completes it", async () => {
    await insertRows(db.pool, [{ key: "m1", payload: { id: "order-4", total: 4 } }]);
    const gate = new Gate();
    let running = false;
    let claims = 0;
    const base = fromPg(db.pool);
    const counting: InboxConnection<PgClient> = {
      ...base,
      execute: (statement, values) => {
        if (statement.name === "claim") {
          claims++;
        }
        return base.execute(statement, values);
      },
    };
    const handled: string[] = [];
    const w1 = run(counting, { source: "orders", shutdownGraceMs: 10_000, pollIntervalMs: 20, maxConcurrency: 2 }, async (message, tx, signal) => {
      handled.push(message.idempotencyKey);
      running = true;
      await gate.wait(signal);
      await insertOrder(message, tx);
    });
    await waitFor("the handler running", () => running);
    w1.stop();
    const claimsAtStop = claims;
    await insertRows(db.pool, [{ key: "m2", payload: { id: "order-x", total: 1 } }]);
    await sleep(100);
    gate.open();
    await within("the stop", w1.done, 5000);
    assert.equal((await stateOf("m1"))!.state, "processed");
    // A claim under way at the stop may still take m2, but no handler runs for it.
    assert.notEqual((await stateOf("m2"))!.state, "processed", "the worker handled a row after the stop");
    assert.equal((await stateOf("m2"))!.attempt, 0);
    assert.deepEqual(handled, ["m1"]);
    assert.equal(claims, claimsAtStop, "the worker went on claiming after the stop");
    assert.deepEqual(await orders(), [{ id: "order-4", total: 4 }]);
  });

  it("holds at most batchSize + maxConcurrency - 1 rows, claiming the next ones while the handlers run", async () => {
    await insertRows(db.pool, Array.from({ length: 10 }, (_, i) => ({ key: `r${i}`, aggregate: `a${i}`, payload: { id: `o${i}`, total: i } })));
    let started = 0;
    const w1 = run(db.pool, { source: "orders", batchSize: 3, maxConcurrency: 2, shutdownGraceMs: 50, pollIntervalMs: 20 }, async (_message, _tx, signal) => {
      started++;
      await untilAborted(signal);
    });
    const processing = async (): Promise<number> =>
      [...(await readRows(db.pool)).values()].filter((r) => r.state === "processing").length;
    await waitFor("two handlers running and four rows held", async () => started === 2 && (await processing()) === 4, 10_000);
    w1.stop();
    await within("the stop", w1.done, 5000);
    assert.equal(started, 2);
    assert.equal(await processing(), 4, "rows held after the stop: want batchSize + maxConcurrency - 1");
    for (const r of (await readRows(db.pool)).values()) {
      assert.equal(r.attempt, 0, `row ${r.key} spent an attempt`);
      assert.equal(r.lastError, null);
    }
  });

  it("a handler that ignores its signal loses its transaction, and run still returns", async () => {
    await insertRows(db.pool, [{ key: "m1", payload: { id: "order-7", total: 7 } }]);
    let running = false;
    const logger = captureLogger();
    const w1 = run(db.pool, { source: "orders", shutdownGraceMs: 100, pollIntervalMs: 20, logger }, async (message, tx) => {
      await insertOrder(message, tx);
      running = true;
      await sleep(12_000); // ignores the signal
    });
    await waitFor("the handler running", () => running);
    w1.stop();
    // Long before the handler would return by itself.
    await within("the stop", w1.done, 6000);
    assert.match(logger.text(), /did not return within 1000 ms/);
    await waitFor("the server to end the transaction", async () => (await orders()).length === 0 &&
      (await db.pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'")).rows[0].n === 0);
    assert.equal((await stateOf("m1"))!.attempt, 0);
  });

  it("a handler stuck in a query past the grace loses its connection, and nothing commits", async () => {
    await insertRows(db.pool, [{ key: "m1", payload: { id: "order-8", total: 8 } }]);
    let running = false;
    let queryError: unknown;
    const w1 = run(db.pool, { source: "orders", shutdownGraceMs: 100, pollIntervalMs: 20 }, async (message, tx) => {
      await insertOrder(message, tx);
      running = true;
      try {
        await tx.query("SELECT pg_sleep(12)");
      } catch (error) {
        queryError = error;
        throw error;
      }
    });
    await waitFor("the handler running", () => running);
    w1.stop();
    // Long before the query would end by itself.
    await within("the stop", w1.done, 6000);
    await waitFor("the stuck query to fail", () => queryError !== undefined, 6000);
    await waitFor("the server to end the transaction", async () => (await orders()).length === 0 &&
      (await db.pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'SELECT pg_sleep%' AND pid <> pg_backend_pid()")).rows[0].n === 0, 20_000);
    const row = (await stateOf("m1"))!;
    assert.deepEqual([row.state, row.attempt, row.lastError], ["processing", 0, null]);
  });

  it("a connection that drops while the handler holds it fails the row's completion, not the process", async () => {
    // The server ends the handler's connection while the handler waits and runs no query. A pg
    // pool does not listen to the "error" event of a client that is checked out: unless the
    // library does, that event is unhandled and ends the process.
    await insertRows(db.pool, [{ key: "m1", payload: { id: "order-9", total: 9 } }]);
    const logger = captureLogger();
    const proceed = new Gate();
    let pid: number | undefined;
    const w1 = run(db.pool, { source: "orders", pollIntervalMs: 20, logger }, async (message, tx) => {
      await insertOrder(message, tx);
      pid = (await tx.query("SELECT pg_backend_pid() AS pid")).rows[0].pid as number;
      await proceed.wait();
    });
    await waitFor("the handler waiting", () => pid !== undefined);
    await db.pool.query("SELECT pg_terminate_backend($1)", [pid]);
    await waitFor("the handler's connection to end", async () =>
      (await db.pool.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1", [pid])).rows[0].n === 0);
    proceed.open();
    await waitFor("the failed completion", () => /completing the message/.test(logger.text()));
    w1.stop();
    await within("the stop", w1.done, 10_000);
    assert.deepEqual(await orders(), []);
    const row = (await stateOf("m1"))!;
    assert.deepEqual([row.state, row.attempt, row.lastError], ["processing", 0, null]);
  });

  it("works on a mapped schema and refuses a name that is not an identifier", async () => {
    await db.pool.query("ALTER TABLE inbox RENAME COLUMN idempotency_key TO dedup_key");
    await db.pool.query("ALTER TABLE inbox RENAME TO qb_inbox");
    const schema = { ...defaultSchema, table: "qb_inbox", idempotencyKey: "dedup_key" };
    assert.throws(() => new InboxWorker(fromPg(db.pool), { source: "orders", schema: { ...schema, table: 'qb"inbox' } }), /schema\.table "qb\\"inbox" is not a SQL identifier/);
    assert.throws(() => new InboxWorker(fromPg(db.pool), { source: "orders", schema: { ...schema, idempotencyKey: "dedup_key; DROP TABLE orders" } }), TypeError);
    await insertRows(db.pool, [{ key: "order-1", aggregate: "customer-7", payload: { id: "order-1", total: 42 } }], "qb_inbox", "dedup_key");
    const keys: string[] = [];
    run(db.pool, { source: "orders", pollIntervalMs: 20, schema }, async (message, tx) => {
      keys.push(message.idempotencyKey);
      await insertOrder(message, tx);
    });
    await waitFor("order-1 processed", async () => (await readRows(db.pool, "qb_inbox", "dedup_key")).get("order-1")?.state === "processed");
    assert.deepEqual(keys, ["order-1"]);
    assert.deepEqual(await orders(), [{ id: "order-1", total: 42 }]);
  });

  it("returns at once for a signal that has aborted, and runs one run at a time", async () => {
    const worker = new InboxWorker(fromPg(db.pool), { source: "orders", pollIntervalMs: 20 });
    await within("run with an aborted signal", worker.run(async () => undefined, AbortSignal.abort()), 5000);
    const controller = new AbortController();
    const first = worker.run(async () => undefined, controller.signal);
    await assert.rejects(worker.run(async () => undefined), /already running/);
    controller.abort();
    await within("the stop", first, 5000);
    await assert.rejects(worker.run(undefined as never), TypeError);
  });
});

describe("InboxWorker without a database", () => {
  it("treats Msg 51000 on a claim as transient and backs off", async () => {
    let claims = 0;
    const lockBusy = Object.assign(new Error("inbox pull claim: sp_getapplock did not acquire the per-source claim lock"), { number: 51000 });
    const connection: InboxConnection<unknown> = {
      dialect: "sqlserver",
      execute: async () => {
        claims++;
        throw lockBusy;
      },
      begin: async () => {
        throw new Error("no transaction expected");
      },
      isTransientClaimError: (error) => (error as { number?: number }).number === 51000,
    };
    const logger = captureLogger();
    const worker = new InboxWorker(connection, { source: "orders", pollIntervalMs: 100, logger });
    const controller = new AbortController();
    const started = performance.now();
    const done = worker.run(async () => undefined, controller.signal);
    await waitFor("four claims", () => claims >= 4, 10_000);
    const took = performance.now() - started;
    controller.abort();
    await within("the stop", done, 5000);
    // The waits double from the poll interval: 100, 200 and 400 ms between the four claims.
    assert.ok(took >= 690, `four claims within ${Math.round(took)} ms: no backoff`);
    const claimLines = logger.lines.filter((l) => l.level !== "info");
    assert.ok(claimLines.every((l) => l.level === "warn"), logger.text());
    assert.deepEqual(claimLines.slice(0, 3).map((l) => l.fields.backoff_ms), [100, 200, 400]);
    assert.match(logger.text(), /claim lock of the source is busy/);
  });

  it("reports other claim errors as errors, redacted, and keeps going", async () => {
    let claims = 0;
    const connection: InboxConnection<unknown> = {
      dialect: "postgresql",
      execute: async () => {
        claims++;
        throw new Error("connect ECONNREFUSED postgres://app:hunter2@db:5432/app");
      },
      begin: async () => {
        throw new Error("no transaction expected");
      },
    };
    const logger = captureLogger();
    const worker = new InboxWorker(connection, { source: "orders", pollIntervalMs: 50, logger });
    const controller = new AbortController();
    const done = worker.run(async () => undefined, controller.signal);
    await waitFor("three claims", () => claims >= 3, 5000);
    controller.abort();
    await within("the stop", done, 5000);
    assert.ok(logger.lines.some((l) => l.level === "error" && l.message === "claiming inbox messages"));
    assert.doesNotMatch(logger.text(), /hunter2/);
    assert.match(logger.text(), /postgres:\/\/\*\*\*@db/);
  });
});

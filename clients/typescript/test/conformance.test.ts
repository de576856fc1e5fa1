// The language-neutral pull-client conformance suite, testdata/pull-conformance/scenarios.json
// (its README describes the format), interpreted against the real PostgreSQL: one fresh
// migrated database per scenario, dropped after it. The Go library interprets the same file.
import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";

import pg from "pg";

import {
  InboxWorker,
  deadLetter,
  defaultRetryPolicy,
  defaultSchema,
  fromPg,
  retryAfter,
  sanitize,
  type InboxHandler,
  type InboxLogger,
  type InboxMessage,
  type InboxOptions,
  type InboxSchema,
  type PgClient,
} from "../src/index.js";
import { newDatabase, repoRoot, type TestDatabase } from "./support.js";

const scenariosPath = join(repoRoot, "testdata", "pull-conformance", "scenarios.json");

// The format, version 1. Every object is checked for unknown keys, so that a change of the
// format fails here instead of being skipped.
interface ScenarioFile {
  version: number;
  scenarios: Scenario[];
}
interface Scenario {
  name: string;
  description?: string;
  schema?: SchemaSpec;
  steps: Step[];
}
interface SchemaSpec {
  table?: string;
  columns?: Record<string, string>;
}
interface Step {
  do: string;
  rows?: RowSpec[];
  worker?: string;
  options?: OptionsSpec;
  handler?: Action[];
  gate?: string;
  key?: string;
  timeoutMs?: number;
  check?: Check;
  withinMs?: number;
  atLeastMs?: number;
  expectError?: boolean;
  path?: string;
}
interface RowSpec {
  key: string;
  source?: string;
  aggregate?: string;
  eventType?: string;
  correlationId?: string;
  headers?: Record<string, string>;
  payload?: unknown;
}
interface OptionsSpec {
  source: string;
  batchSize?: number;
  leaseMs?: number;
  maxConcurrency?: number;
  pollIntervalMs?: number;
  shutdownGraceMs?: number;
  schema?: SchemaSpec;
  retryPolicy?: PolicySpec;
}
interface PolicySpec {
  kind: "default" | "deadLetterJsonSyntax";
  maxAttempts?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  jitter?: number;
  retryDelayMs?: number;
}
interface Action {
  do: string;
  message?: Record<string, unknown>;
  error?: string;
  field?: string;
  gate?: string;
  ms?: number;
}
interface RunPattern {
  worker?: string;
  key?: string;
  outcome?: string;
  attempt?: number;
}
interface Check {
  rows?: RowCheck[];
  orders?: { id: string; total: number }[];
  writes?: RunPattern[];
  runs?: RunPattern[];
  running?: RunPattern[];
  runsInOrder?: string[][];
  maxConcurrentPerAggregate?: number;
  retryGaps?: { key: string; atLeastMs: number[] };
  distinctClaimTokens?: { key: string; count: number };
  logsContain?: string[];
  logsExclude?: string[];
}
interface RowCheck {
  key: string;
  source?: string;
  state?: string;
  attempt?: number;
  lastError?: string | null;
  lastErrorContains?: string;
  hasLastError?: boolean;
}

const allowedKeys: Record<string, readonly string[]> = {
  file: ["version", "scenarios"],
  scenario: ["name", "description", "schema", "steps"],
  schema: ["table", "columns"],
  step: ["do", "rows", "worker", "options", "handler", "gate", "key", "timeoutMs", "check", "withinMs", "atLeastMs", "expectError", "path"],
  row: ["key", "source", "aggregate", "eventType", "correlationId", "headers", "payload"],
  options: ["source", "batchSize", "leaseMs", "maxConcurrency", "pollIntervalMs", "shutdownGraceMs", "schema", "retryPolicy"],
  policy: ["kind", "maxAttempts", "baseDelayMs", "maxDelayMs", "jitter", "retryDelayMs"],
  action: ["do", "message", "error", "field", "gate", "ms"],
  check: ["rows", "orders", "writes", "runs", "running", "runsInOrder", "maxConcurrentPerAggregate", "retryGaps", "distinctClaimTokens", "logsContain", "logsExclude"],
  rowCheck: ["key", "source", "state", "attempt", "lastError", "lastErrorContains", "hasLastError"],
  runPattern: ["worker", "key", "outcome", "attempt"],
};

function checkKeys(kind: keyof typeof allowedKeys, value: unknown, where: string): void {
  assert.ok(typeof value === "object" && value !== null, `${where}: a ${kind} must be an object`);
  for (const key of Object.keys(value)) {
    assert.ok(allowedKeys[kind]!.includes(key), `${where}: unknown ${kind} field ${JSON.stringify(key)}`);
  }
}

/** Checks the whole file against the format this interpreter reads. */
function validate(file: ScenarioFile): void {
  checkKeys("file", file, "file");
  assert.equal(file.version, 1, "this interpreter reads version 1 of the scenarios");
  const names = new Set<string>();
  for (const sc of file.scenarios) {
    checkKeys("scenario", sc, sc.name);
    assert.ok(sc.name && !names.has(sc.name), `scenario name ${JSON.stringify(sc.name)} is empty or repeated`);
    names.add(sc.name);
    if (sc.schema) {
      checkKeys("schema", sc.schema, sc.name);
    }
    sc.steps.forEach((s, i) => {
      const where = `${sc.name}, step ${i + 1}`;
      checkKeys("step", s, where);
      s.rows?.forEach((r) => checkKeys("row", r, where));
      if (s.options) {
        checkKeys("options", s.options, where);
        if (s.options.retryPolicy) {
          checkKeys("policy", s.options.retryPolicy, where);
        }
        if (s.options.schema) {
          checkKeys("schema", s.options.schema, where);
        }
      }
      s.handler?.forEach((a) => checkKeys("action", a, where));
      if (s.check) {
        checkKeys("check", s.check, where);
        s.check.rows?.forEach((r) => checkKeys("rowCheck", r, where));
        for (const list of [s.check.runs, s.check.running, s.check.writes]) {
          list?.forEach((p) => checkKeys("runPattern", p, where));
        }
      }
    });
  }
}

/** The camelCase schema keys of the scenarios and their default column names. */
const columnKeys: Record<string, string> = Object.fromEntries(
  Object.entries(defaultSchema).filter(([key]) => key !== "table"),
);

function toSchema(spec: SchemaSpec | undefined): InboxSchema | undefined {
  if (spec === undefined) {
    return undefined;
  }
  const out: Record<string, string> = { ...defaultSchema };
  if (spec.table) {
    out.table = spec.table;
  }
  for (const [key, value] of Object.entries(spec.columns ?? {})) {
    assert.ok(key in columnKeys, `schema column key ${JSON.stringify(key)} is unknown`);
    out[key] = value;
  }
  return out as unknown as InboxSchema;
}

const quote = (name: string): string => `"${name.replaceAll('"', '""')}"`;

/** One call of a handler, as the harness saw it. */
interface Run {
  worker: string;
  key: string;
  source: string;
  aggregate: string | null;
  attempt: number;
  token: string | null;
  start: number;
  end: number;
  outcome: "running" | "succeeded" | "failed" | "cancelled";
}

interface WorkerState {
  controller: AbortController;
  done: Promise<unknown>;
  settled: boolean;
  error: unknown;
  stoppedAt: number | undefined;
  pool: pg.Pool;
}

class Harness {
  readonly runs: Run[] = [];
  readonly logs: string[] = [];
  /** The expectMessage actions that failed, reported by the step after them. */
  readonly mismatches: string[] = [];
  readonly workers = new Map<string, WorkerState>();
  readonly gates = new Map<string, { open: boolean; waiters: (() => void)[] }>();
  readonly busy = new Map<string, number>();
  maxPerAggregate = 0;
  table = quote("inbox");
  readonly col = new Map<string, string>(Object.values(columnKeys).map((c) => [c, quote(c)]));
  schema: InboxSchema | undefined;

  constructor(readonly sc: Scenario, readonly db: TestDatabase) {}

  c(column: string): string {
    return this.col.get(column)!;
  }

  async setUp(): Promise<void> {
    await this.db.pool.query("CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)");
    await this.db.pool.query("CREATE TABLE handler_writes (worker TEXT NOT NULL, idempotency_key TEXT NOT NULL)");
    const spec = this.sc.schema;
    if (spec) {
      this.schema = toSchema(spec);
      for (const [key, mapped] of Object.entries(spec.columns ?? {})) {
        await this.db.pool.query(`ALTER TABLE inbox RENAME COLUMN ${quote(columnKeys[key]!)} TO ${quote(mapped)}`);
        this.col.set(columnKeys[key]!, quote(mapped));
      }
      if (spec.table) {
        await this.db.pool.query(`ALTER TABLE inbox RENAME TO ${quote(spec.table)}`);
        this.table = quote(spec.table);
      }
    }
  }

  /** Opens every gate and stops every worker that the scenario left running. */
  async cleanUp(): Promise<void> {
    for (const name of this.gates.keys()) {
      this.openGate(name);
    }
    for (const w of this.workers.values()) {
      w.controller.abort();
    }
    const stuck: string[] = [];
    await Promise.all([...this.workers].map(async ([name, w]) => {
      const stopped = await settlesWithin(w.done, 60_000);
      if (!stopped) {
        stuck.push(name);
      }
      await w.pool.end().catch(() => undefined);
    }));
    assert.deepEqual(stuck, [], "workers that did not stop within a minute");
  }

  async run(): Promise<void> {
    for (const [i, s] of this.sc.steps.entries()) {
      const where = `step ${i + 1} (${s.do})`;
      await this.step(where, s);
      assert.deepEqual(this.mismatches, [], `${where}: a handler saw a message other than expected`);
    }
  }

  async step(where: string, s: Step): Promise<void> {
    switch (s.do) {
      case "insert":
        await this.insert(s.rows ?? []);
        return;
      case "start":
        this.start(where, s);
        return;
      case "stop": {
        const w = this.workers.get(s.worker!);
        assert.ok(w, `${where}: no worker ${s.worker}`);
        w.stoppedAt = performance.now();
        w.controller.abort();
        return;
      }
      case "awaitStopped": {
        const w = this.workers.get(s.worker!);
        assert.ok(w && w.stoppedAt !== undefined, `${where}: worker ${s.worker} was not stopped`);
        const left = w.stoppedAt + (s.withinMs ?? 0) - performance.now();
        const stopped = await settlesWithin(w.done, Math.max(0, left));
        assert.ok(stopped, `${where}: worker ${s.worker} did not stop within ${s.withinMs} ms of the stop`);
        const took = performance.now() - w.stoppedAt;
        assert.equal(w.error, undefined, `${where}: run of worker ${s.worker} rejected with ${String(w.error)}`);
        assert.ok(took >= (s.atLeastMs ?? 0), `${where}: worker ${s.worker} stopped after ${Math.round(took)} ms, want at least ${s.atLeastMs} ms`);
        return;
      }
      case "openGate":
        this.openGate(s.gate!);
        return;
      case "expireLease": {
        const result = await this.db.pool.query(
          `UPDATE ${this.table} SET ${this.c("lease_expires_at")} = clock_timestamp() - INTERVAL '1 millisecond' ` +
            `WHERE ${this.c("idempotency_key")} = $1 AND ${this.c("state")} = 'processing'`,
          [s.key],
        );
        assert.equal(result.rowCount, 1, `${where}: expiring the lease of ${s.key} changed ${result.rowCount} rows`);
        return;
      }
      case "waitFor": {
        const deadline = performance.now() + (s.timeoutMs ?? 0);
        for (;;) {
          const problem = await this.evaluate(s.check);
          if (problem === undefined) {
            return;
          }
          assert.ok(performance.now() <= deadline, `${where}: not true within ${s.timeoutMs} ms: ${problem}`);
          await delay(20);
        }
      }
      case "check": {
        const problem = await this.evaluate(s.check);
        assert.equal(problem, undefined, `${where}: ${problem}`);
        return;
      }
      case "newWorker": {
        let error: unknown;
        try {
          new InboxWorker(fromPg(this.db.pool), this.options(s.options!));
        } catch (e) {
          error = e;
        }
        assert.equal(error !== undefined, s.expectError === true, `${where}: new InboxWorker threw ${String(error)}, want an error: ${s.expectError}`);
        return;
      }
      case "redactionCorpus": {
        const cases: { name: string; input: string; want: string }[] = JSON.parse(readFileSync(join(dirname(scenariosPath), s.path!), "utf8"));
        assert.ok(cases.length > 0, `${where}: the corpus is empty`);
        for (const c of cases) {
          assert.equal(sanitize(c.input), c.want, `${where}: corpus case ${c.name}`);
        }
        return;
      }
      default:
        assert.fail(`${where}: unknown step`);
    }
  }

  /** Inserts the rows with created_at and scheduled_at a microsecond apart, in the given order. */
  async insert(rows: RowSpec[]): Promise<void> {
    const base = (await this.db.pool.query("SELECT clock_timestamp() - INTERVAL '1 second' AS base")).rows[0].base as Date;
    const columns = ["source", "idempotency_key", "aggregate_id", "event_type", "correlation_id", "headers", "payload", "consumption", "state", "created_at", "scheduled_at"];
    const text =
      `INSERT INTO ${this.table} (${columns.map((c) => this.c(c)).join(", ")}) ` +
      `VALUES ($1, $2, $3, $4, $5, CAST($6 AS JSONB), CAST($7 AS JSONB), 'pull', 'pending', ` +
      `CAST($8 AS TIMESTAMPTZ) + $9 * INTERVAL '1 microsecond', CAST($8 AS TIMESTAMPTZ) + $9 * INTERVAL '1 microsecond')`;
    for (const [i, r] of rows.entries()) {
      await this.db.pool.query(text, [
        r.source ?? "orders", r.key, r.aggregate ?? null, r.eventType ?? null, r.correlationId ?? null,
        JSON.stringify(r.headers ?? {}), JSON.stringify(r.payload ?? {}), base, i,
      ]);
    }
  }

  options(spec: OptionsSpec): InboxOptions {
    const logger = this.logger();
    const options: Record<string, unknown> = { source: spec.source, logger };
    for (const key of ["batchSize", "leaseMs", "maxConcurrency", "pollIntervalMs", "shutdownGraceMs"] as const) {
      if (spec[key] !== undefined && spec[key] !== 0) {
        options[key] = spec[key];
      }
    }
    const schema = spec.schema ? toSchema(spec.schema) : this.schema;
    if (schema) {
      options.schema = schema;
    }
    const p = spec.retryPolicy;
    if (p?.kind === "default") {
      options.retryPolicy = defaultRetryPolicy({ maxAttempts: p.maxAttempts, baseDelayMs: p.baseDelayMs, maxDelayMs: p.maxDelayMs, jitter: p.jitter });
    } else if (p?.kind === "deadLetterJsonSyntax") {
      const retryDelayMs = p.retryDelayMs ?? 0;
      options.retryPolicy = (_: InboxMessage, failure: unknown) => (failure instanceof SyntaxError ? deadLetter() : retryAfter(retryDelayMs));
    } else if (p !== undefined) {
      assert.fail(`retry policy kind ${JSON.stringify(p.kind)} is unknown`);
    }
    return options as unknown as InboxOptions;
  }

  logger(): InboxLogger {
    const line = (level: string) => (message: string, fields: Readonly<Record<string, unknown>> = {}) => {
      const parts = Object.keys(fields).sort().map((k) => ` ${k}=${String(fields[k])}`);
      this.logs.push(`${level} ${message}${parts.join("")}`);
    };
    return { info: line("INFO"), warn: line("WARN"), error: line("ERROR") };
  }

  start(where: string, s: Step): void {
    assert.ok(!this.workers.has(s.worker!), `${where}: worker ${s.worker} already exists`);
    // Each worker has a pool of its own, as a process of its own would.
    const pool = new pg.Pool({ connectionString: this.db.url, max: 10 });
    pool.on("error", () => undefined);
    const worker = new InboxWorker(fromPg(pool), this.options(s.options!));
    const controller = new AbortController();
    const state: WorkerState = { controller, done: Promise.resolve(), settled: false, error: undefined, stoppedAt: undefined, pool };
    state.done = worker.run(this.handler(s.worker!, s.handler ?? []), controller.signal).then(
      () => { state.settled = true; },
      (error: unknown) => { state.settled = true; state.error = error; },
    );
    this.workers.set(s.worker!, state);
  }

  gate(name: string): { open: boolean; waiters: (() => void)[] } {
    let g = this.gates.get(name);
    if (!g) {
      g = { open: false, waiters: [] };
      this.gates.set(name, g);
    }
    return g;
  }

  openGate(name: string): void {
    const g = this.gate(name);
    g.open = true;
    for (const wake of g.waiters.splice(0)) {
      wake();
    }
  }

  /** The scripted handler of a worker: it runs the actions in order and records the run. */
  handler(worker: string, actions: Action[]): InboxHandler<PgClient> {
    return async (message, tx, signal) => {
      const run = await this.begin(worker, message);
      try {
        await this.act(worker, actions, message, tx, signal);
        this.finish(run, "succeeded");
      } catch (error) {
        this.finish(run, signal.aborted ? "cancelled" : "failed");
        throw error;
      }
    };
  }

  async begin(worker: string, message: InboxMessage): Promise<Run> {
    const run: Run = {
      worker, key: message.idempotencyKey, source: message.source, aggregate: message.aggregateId,
      attempt: message.attempt, token: null, start: performance.now(), end: 0, outcome: "running",
    };
    this.runs.push(run);
    if (message.aggregateId !== null && message.aggregateId !== "") {
      const key = `${message.source}\u0000${message.aggregateId}`;
      this.busy.set(key, (this.busy.get(key) ?? 0) + 1);
      this.maxPerAggregate = Math.max(this.maxPerAggregate, this.busy.get(key)!);
    }
    // The harness, not the handler, reads the claim token, on a connection of its own.
    const result = await this.db.pool.query(
      `SELECT CAST(${this.c("claim_token")} AS TEXT) AS token FROM ${this.table} WHERE ${this.c("id")} = CAST($1 AS UUID)`,
      [message.id],
    );
    run.token = result.rows[0]?.token ?? null;
    return run;
  }

  finish(run: Run, outcome: Run["outcome"]): void {
    run.end = performance.now();
    run.outcome = outcome;
    if (run.aggregate !== null && run.aggregate !== "") {
      const key = `${run.source}\u0000${run.aggregate}`;
      this.busy.set(key, this.busy.get(key)! - 1);
    }
  }

  async act(worker: string, actions: Action[], message: InboxMessage, tx: PgClient, signal: AbortSignal): Promise<void> {
    for (const a of actions) {
      switch (a.do) {
        case "expectMessage":
          try {
            expectMessage(message, a.message ?? {});
          } catch (error) {
            this.mismatches.push(String(error));
            throw error;
          }
          break;
        case "insertOrder": {
          const order = message.payload as { id: string; total: number };
          await tx.query("INSERT INTO orders (id, total) VALUES ($1, $2)", [order.id, order.total]);
          break;
        }
        case "recordWrite":
          await tx.query("INSERT INTO handler_writes (worker, idempotency_key) VALUES ($1, $2)", [worker, message.idempotencyKey]);
          break;
        case "fail":
          throw new Error(a.error);
        case "parseJson": {
          const text = (message.payload as Record<string, unknown>)[a.field!];
          JSON.parse(typeof text === "string" ? text : ""); // a SyntaxError fails the run
          break;
        }
        case "waitGate": {
          const g = this.gate(a.gate!);
          if (!g.open) {
            await new Promise<void>((resolve, reject) => {
              const onAbort = (): void => reject(signal.reason);
              if (signal.aborted) {
                onAbort();
                return;
              }
              signal.addEventListener("abort", onAbort, { once: true });
              g.waiters.push(() => {
                signal.removeEventListener("abort", onAbort);
                resolve();
              });
            });
          }
          break;
        }
        case "blockUntilCancelled":
          await new Promise<never>((_, reject) => {
            if (signal.aborted) {
              reject(signal.reason);
            }
            signal.addEventListener("abort", () => reject(signal.reason), { once: true });
          });
          break;
        case "sleep":
          await new Promise<void>((resolve, reject) => {
            const timer = setTimeout(() => {
              signal.removeEventListener("abort", onAbort);
              resolve();
            }, a.ms ?? 0);
            const onAbort = (): void => {
              clearTimeout(timer);
              reject(signal.reason);
            };
            signal.addEventListener("abort", onAbort, { once: true });
          });
          break;
        default:
          throw new Error(`unknown handler action ${JSON.stringify(a.do)}`);
      }
    }
  }

  /** Returns undefined when every part of the check holds, or what does not. */
  async evaluate(c: Check | undefined): Promise<string | undefined> {
    if (c === undefined) {
      return "the step has no check";
    }
    for (const rc of c.rows ?? []) {
      const values: unknown[] = [rc.key];
      let text = `SELECT ${this.c("state")} AS state, ${this.c("attempt")} AS attempt, ${this.c("last_error")} AS last_error ` +
        `FROM ${this.table} WHERE ${this.c("idempotency_key")} = $1`;
      if (rc.source !== undefined) {
        text += ` AND ${this.c("source")} = $2`;
        values.push(rc.source);
      }
      const { rows } = await this.db.pool.query(text, values);
      if (rows.length !== 1) {
        return `row ${rc.key}: found ${rows.length} rows, want 1`;
      }
      const row = rows[0] as { state: string; attempt: number; last_error: string | null };
      if (rc.state !== undefined && row.state !== rc.state) {
        return `row ${rc.key}: state is ${row.state}, want ${rc.state}`;
      }
      if (rc.attempt !== undefined && row.attempt !== rc.attempt) {
        return `row ${rc.key}: attempt is ${row.attempt}, want ${rc.attempt}`;
      }
      if (rc.lastError !== undefined && row.last_error !== rc.lastError) {
        return `row ${rc.key}: last_error is ${JSON.stringify(row.last_error)}, want ${JSON.stringify(rc.lastError)}`;
      }
      if (rc.lastErrorContains !== undefined && !(row.last_error ?? "").includes(rc.lastErrorContains)) {
        return `row ${rc.key}: last_error ${JSON.stringify(row.last_error)} does not contain ${JSON.stringify(rc.lastErrorContains)}`;
      }
      if (rc.hasLastError !== undefined && (row.last_error !== null && row.last_error !== "") !== rc.hasLastError) {
        return `row ${rc.key}: last_error is ${JSON.stringify(row.last_error)}, want set: ${rc.hasLastError}`;
      }
    }
    if (c.orders !== undefined) {
      const got = (await this.db.pool.query("SELECT id, total FROM orders ORDER BY id")).rows;
      const want = [...c.orders].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      if (!isDeepStrictEqual(got.map((o) => ({ id: o.id, total: o.total })), want)) {
        return `orders are ${JSON.stringify(got)}, want ${JSON.stringify(want)}`;
      }
    }
    if (c.writes !== undefined) {
      const got = (await this.db.pool.query("SELECT worker, idempotency_key FROM handler_writes")).rows
        .map((r) => ({ worker: r.worker as string, key: r.idempotency_key as string }));
      if (!matchRuns(c.writes, got)) {
        return `handler_writes are ${JSON.stringify(got)}, want ${JSON.stringify(c.writes)}`;
      }
    }
    const runs = this.runs.map((r) => ({ ...r }));
    const running = runs.filter((r) => r.outcome === "running");
    if (c.runs !== undefined && !matchRuns(c.runs, runs)) {
      return `runs are ${describeRuns(runs)}, want ${JSON.stringify(c.runs)}`;
    }
    if (c.running !== undefined && !matchRuns(c.running, running)) {
      return `running handlers are ${describeRuns(running)}, want ${JSON.stringify(c.running)}`;
    }
    for (const keys of c.runsInOrder ?? []) {
      const selected = runs.filter((r) => keys.includes(r.key)).sort((a, b) => a.start - b.start);
      for (const [i, r] of selected.entries()) {
        if (r.outcome === "running") {
          return `runsInOrder ${JSON.stringify(keys)}: ${r.key} is still running`;
        }
        if (i > 0 && selected[i - 1]!.end > r.start) {
          return `runsInOrder ${JSON.stringify(keys)}: ${r.key} started before ${selected[i - 1]!.key} ended`;
        }
      }
      const order = selected.map((r) => r.key);
      if (!isDeepStrictEqual(order, keys)) {
        return `runsInOrder: runs started in the order ${JSON.stringify(order)}, want ${JSON.stringify(keys)}`;
      }
    }
    if (c.maxConcurrentPerAggregate !== undefined && this.maxPerAggregate > c.maxConcurrentPerAggregate) {
      return `up to ${this.maxPerAggregate} runs of one aggregate ran at once, want at most ${c.maxConcurrentPerAggregate}`;
    }
    if (c.retryGaps !== undefined) {
      const { key, atLeastMs } = c.retryGaps;
      const selected = runs.filter((r) => r.key === key).sort((a, b) => a.start - b.start);
      if (selected.length < atLeastMs.length + 1) {
        return `retryGaps: ${key} ran ${selected.length} times, want at least ${atLeastMs.length + 1}`;
      }
      for (const [i, least] of atLeastMs.entries()) {
        const gap = selected[i + 1]!.start - selected[i]!.end;
        if (gap < least - 10) {
          return `retryGaps: run ${i + 2} of ${key} started ${Math.round(gap)} ms after run ${i + 1} ended, want at least ${least} ms`;
        }
      }
    }
    if (c.distinctClaimTokens !== undefined) {
      const { key, count } = c.distinctClaimTokens;
      const tokens = new Set(runs.filter((r) => r.key === key).map((r) => r.token));
      if (tokens.size !== count) {
        return `${key} ran under ${tokens.size} distinct claim tokens, want ${count}`;
      }
    }
    for (const s of c.logsContain ?? []) {
      if (!this.logs.some((l) => l.includes(s))) {
        return `no log line contains ${JSON.stringify(s)}; lines: ${JSON.stringify(this.logs)}`;
      }
    }
    for (const s of c.logsExclude ?? []) {
      const line = this.logs.find((l) => l.includes(s));
      if (line !== undefined) {
        return `a log line contains ${JSON.stringify(s)}: ${JSON.stringify(line)}`;
      }
    }
    return undefined;
  }
}

/** Every pattern matches a distinct run, and no run is left over. */
function matchRuns(patterns: RunPattern[], runs: { worker: string; key: string; outcome?: string; attempt?: number }[]): boolean {
  if (patterns.length !== runs.length) {
    return false;
  }
  const used = runs.map(() => false);
  const attempt = (i: number): boolean => {
    if (i === patterns.length) {
      return true;
    }
    const p = patterns[i]!;
    for (const [j, r] of runs.entries()) {
      if (used[j] ||
        (p.worker !== undefined && p.worker !== r.worker) ||
        (p.key !== undefined && p.key !== r.key) ||
        (p.outcome !== undefined && p.outcome !== r.outcome) ||
        (p.attempt !== undefined && p.attempt !== r.attempt)) {
        continue;
      }
      used[j] = true;
      if (attempt(i + 1)) {
        return true;
      }
      used[j] = false;
    }
    return false;
  };
  return attempt(0);
}

function describeRuns(runs: Run[]): string {
  return `[${runs.map((r) => `{${r.worker} ${r.key} attempt=${r.attempt} ${r.outcome}}`).join(" ")}]`;
}

/** Compares the fields that `want` gives with the message; throws on a difference. */
function expectMessage(message: InboxMessage, want: Record<string, unknown>): void {
  for (const [field, value] of Object.entries(want)) {
    assert.ok(field in message && field !== "id", `message mismatch: unknown field ${JSON.stringify(field)}`);
    const got = message[field as keyof InboxMessage];
    if (!isDeepStrictEqual(got, value)) {
      throw new Error(`message mismatch: ${field} is ${JSON.stringify(got)}, want ${JSON.stringify(value)}`);
    }
  }
}

/** Reports whether `promise` settles within `ms`, leaving no timer behind. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise.then(() => true, () => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

describe("pull-client conformance scenarios", () => {
  if (!existsSync(scenariosPath)) {
    it("needs testdata/pull-conformance/scenarios.json", () => assert.fail(`${scenariosPath} is missing`));
    return;
  }
  const file: ScenarioFile = JSON.parse(readFileSync(scenariosPath, "utf8"));

  it("reads the scenario format, version 1", () => {
    validate(file);
    assert.ok(file.scenarios.length > 0);
  });

  for (const sc of file.scenarios) {
    it(sc.name, async () => {
      const needsDatabase = sc.steps.some((s) => s.do !== "redactionCorpus");
      const db = needsDatabase ? await newDatabase("conf") : undefined;
      const h = db ? new Harness(sc, db) : new Harness(sc, undefined as never);
      try {
        if (db) {
          await h.setUp();
        }
        await h.run();
      } finally {
        try {
          await h.cleanUp();
        } finally {
          await db?.drop();
        }
      }
    });
  }
});

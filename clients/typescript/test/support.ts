// Test support: a private PostgreSQL database per test, migrated with the QueueBox migrations,
// and helpers to run workers and wait on conditions with a deadline.
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import pg from "pg";

import {
  InboxWorker,
  fromPg,
  type InboxConnection,
  type InboxHandler,
  type InboxLogger,
  type InboxOptions,
  type PgClient,
} from "../src/index.js";

/** The package folder (clients/typescript), from build/test/. */
export const packageRoot = fileURLToPath(new URL("../../", import.meta.url));
/** The repository root. */
export const repoRoot = join(packageRoot, "..", "..");

/** The server that tests use: QUEUEBOX_TEST_DATABASE_URL, or the local PostgreSQL. */
export const serverUrl = process.env.QUEUEBOX_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

const startHint =
  "start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start " +
  "(or set QUEUEBOX_TEST_DATABASE_URL to a server where the user may CREATE DATABASE)";

/** The PostgreSQL migrations (V1..V11), in version order. */
export function migrations(): { version: number; sql: string }[] {
  const dir = join(repoRoot, "migrations", "postgresql");
  return readdirSync(dir)
    .map((file) => ({ file, match: /^V(\d+)__\w+\.sql$/.exec(file) }))
    .filter((entry) => entry.match !== null)
    .map((entry) => ({ version: Number(entry.match![1]), sql: readFileSync(join(dir, entry.file), "utf8") }))
    .sort((a, b) => a.version - b.version);
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = "/" + database;
  return u.toString();
}

/** A fresh database on the test server, migrated, with a pool; `drop` removes it. */
export interface TestDatabase {
  readonly name: string;
  readonly url: string;
  readonly pool: pg.Pool;
  drop(): Promise<void>;
}

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl });
  try {
    await client.connect();
  } catch (error) {
    throw new Error(`PostgreSQL at ${serverUrl.replace(/\/\/[^@/]*@/, "//***@")} does not answer (${(error as Error).message}); ${startHint}`);
  }
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Creates a database named after `hint`, applies the migrations unless `migrate` is false. */
export async function newDatabase(hint: string, { migrate = true, poolSize = 12 } = {}): Promise<TestDatabase> {
  const name = `qbts_${hint.toLowerCase().replace(/[^a-z0-9_]+/g, "_").slice(0, 36)}_${randomBytes(5).toString("hex")}`;
  await admin((client) => client.query(`CREATE DATABASE "${name}"`));
  const url = withDatabase(serverUrl, name);
  const pool = new pg.Pool({ connectionString: url, max: poolSize });
  pool.on("error", () => undefined); // a connection that the library closed on purpose
  if (migrate) {
    for (const m of migrations()) {
      await pool.query(m.sql);
    }
  }
  return {
    name,
    url,
    pool,
    async drop() {
      await pool.end().catch(() => undefined);
      await admin((client) => client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    },
  };
}

/** One inbox row to insert. */
export interface Seed {
  key: string;
  source?: string;
  aggregate?: string | null;
  eventType?: string | null;
  correlationId?: string | null;
  headers?: Record<string, string>;
  payload?: unknown;
}

/** Inserts pull rows one statement at a time, so created_at and scheduled_at grow in insertion order. */
export async function insertRows(pool: pg.Pool, rows: Seed[], table = "inbox", keyColumn = "idempotency_key"): Promise<void> {
  for (const row of rows) {
    await pool.query(
      `INSERT INTO ${table} (source, ${keyColumn}, aggregate_id, event_type, correlation_id, headers, payload, consumption, state, created_at, scheduled_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, 'pull', 'pending', clock_timestamp(), clock_timestamp())`,
      [
        row.source ?? "orders",
        row.key,
        row.aggregate ?? null,
        row.eventType ?? null,
        row.correlationId ?? null,
        JSON.stringify(row.headers ?? {}),
        JSON.stringify(row.payload ?? {}),
      ],
    );
  }
}

/** The business table of the tutorial. */
export async function createOrders(pool: pg.Pool): Promise<void> {
  await pool.query("CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)");
}

/** One inbox row as the tests read it. */
export interface RowState {
  key: string;
  source: string;
  state: string;
  attempt: number;
  lastError: string | null;
  token: string | null;
}

export async function readRows(pool: pg.Pool, table = "inbox", keyColumn = "idempotency_key"): Promise<Map<string, RowState>> {
  const result = await pool.query(`SELECT source, ${keyColumn} AS key, state, attempt, last_error, claim_token FROM ${table}`);
  const out = new Map<string, RowState>();
  for (const r of result.rows) {
    out.set(r.key, { key: r.key, source: r.source, state: r.state, attempt: r.attempt, lastError: r.last_error, token: r.claim_token });
  }
  return out;
}

/** Polls `condition` until it holds, or fails with `what` after `timeoutMs`. */
export async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 10_000, everyMs = 20): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      if (await condition()) {
        return;
      }
    } catch (error) {
      lastError = error;
    }
    if (performance.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ""}`);
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** A promise that settles within `ms`, or fails with `what`. */
export async function within<T>(what: string, promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A log line that a test logger captured. */
export interface LogLine {
  level: "info" | "warn" | "error";
  message: string;
  fields: Readonly<Record<string, unknown>>;
}

/** A logger that keeps every line. */
export function captureLogger(): InboxLogger & { lines: LogLine[]; text(): string } {
  const lines: LogLine[] = [];
  const add = (level: LogLine["level"]) => (message: string, fields: Readonly<Record<string, unknown>> = {}) => {
    lines.push({ level, message, fields });
  };
  return {
    lines,
    info: add("info"),
    warn: add("warn"),
    error: add("error"),
    text: () => lines.map((l) => `${l.level} ${l.message} ${JSON.stringify(l.fields)}`).join("\n"),
  };
}

/** A worker running in the background. */
export interface RunningWorker {
  readonly worker: InboxWorker<PgClient>;
  readonly done: Promise<void>;
  stoppedAt: number | undefined;
  stop(): void;
}

export function startWorker(
  target: pg.Pool | InboxConnection<PgClient>,
  options: InboxOptions,
  handler: InboxHandler<PgClient>,
): RunningWorker {
  const connection = target instanceof pg.Pool ? fromPg(target) : target;
  const worker = new InboxWorker(connection, options);
  const controller = new AbortController();
  const running: RunningWorker = {
    worker,
    done: worker.run(handler, controller.signal),
    stoppedAt: undefined,
    stop() {
      if (running.stoppedAt === undefined) {
        running.stoppedAt = performance.now();
      }
      controller.abort();
    },
  };
  return running;
}

/** A gate that handlers wait on until the test opens it; waiting honours the handler's signal. */
export class Gate {
  #open = false;
  #waiters: (() => void)[] = [];

  get isOpen(): boolean {
    return this.#open;
  }

  open(): void {
    this.#open = true;
    for (const wake of this.#waiters.splice(0)) {
      wake();
    }
  }

  wait(signal?: AbortSignal): Promise<void> {
    if (this.#open) {
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const onAbort = (): void => reject(signal!.reason);
      if (signal?.aborted) {
        onAbort();
        return;
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#waiters.push(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
    });
  }
}

/** Sleeps `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Resolves when the signal aborts, then rejects with its reason. */
export function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

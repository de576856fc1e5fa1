/**
 * The adapter for `mssql` (node-mssql, on tedious). The package imports no driver: the
 * application passes the `mssql` module and its own connected pool.
 *
 * @module
 */

import type { InboxConnection, InboxResult, InboxTransaction, InboxValues } from "./connection.js";
import type { ResolvedInboxOptions } from "./options.js";
import type { InboxParameterName, InboxStatement } from "./sql.js";

/** The part of an `mssql.Request` that the library uses. */
export interface MssqlRequest {
  arrayRowMode: boolean;
  input(name: string, type: never, value: unknown): unknown;
  query(command: string): Promise<{ recordset?: unknown; rowsAffected: number[] }>;
}

/** The part of an `mssql.Transaction` that the library uses. */
export interface MssqlTransaction {
  begin(): Promise<unknown>;
  commit(): Promise<void>;
  rollback(): Promise<void>;
}

/** The part of the `mssql` module that the library uses: its classes and data types. */
export interface MssqlModule<Pool = any, Transaction extends MssqlTransaction = MssqlTransaction> {
  readonly Request: new (parent: any) => MssqlRequest;
  readonly Transaction: new (pool: Pool) => Transaction;
  readonly NVarChar: (length?: number) => unknown;
  readonly Int: unknown;
  readonly UniqueIdentifier: unknown;
  readonly MAX: number;
}

/** The SQL Server error number of the claim that did not get the per-source lock in 10 seconds. */
export const CLAIM_LOCK_ERROR = 51000;

/** The shortest driver timeout that lets the server raise Msg 51000 before the driver gives up. */
const MIN_REQUEST_TIMEOUT_MS = 30_000;

/**
 * The adapter for an `mssql` pool. It takes the `mssql` module itself, so that the package
 * imports no driver. Each statement runs on a `new mssql.Request(pool)`, so on a pooled
 * connection of its own; each handler gets an `mssql.Transaction` that has begun, on which it
 * runs `new mssql.Request(tx)` (or `tx.request()`).
 *
 * Set `requestTimeout` of the pool to at least 30000: the claim waits up to 10 seconds for the
 * per-source lock, and the driver default of 15000 can give up first, which leaves the lock
 * held until the connection resets. Do not set `NOCOUNT ON` on the connections: the fence reads
 * the row counts.
 *
 * @example
 * import mssql from "mssql";
 * const pool = await new mssql.ConnectionPool({ ...config, requestTimeout: 30_000 }).connect();
 * const worker = new InboxWorker(fromMssql(mssql, pool), { source: "orders", dialect: "sqlserver" });
 */
export function fromMssql<Pool extends object, Transaction extends MssqlTransaction = MssqlTransaction>(
  mssql: MssqlModule<Pool, Transaction>,
  pool: Pool,
): InboxConnection<Transaction> {
  if (typeof mssql !== "object" && typeof mssql !== "function") {
    throw new TypeError("queuebox-inbox: fromMssql needs the mssql module as its first argument");
  }
  if (mssql === null || typeof mssql.Request !== "function" || typeof mssql.Transaction !== "function") {
    throw new TypeError("queuebox-inbox: fromMssql needs the mssql module (import mssql from \"mssql\") as its first argument");
  }
  if (typeof pool !== "object" || pool === null) {
    throw new TypeError("queuebox-inbox: fromMssql needs an mssql.ConnectionPool as its second argument");
  }
  const types: Record<InboxParameterName, unknown> = {
    source: mssql.NVarChar(4000),
    batch: mssql.Int,
    lease_ms: mssql.Int,
    cand_limit: mssql.Int,
    id: mssql.UniqueIdentifier,
    token: mssql.UniqueIdentifier,
    delay_ms: mssql.Int,
    error: mssql.NVarChar(mssql.MAX),
  };
  const run = async (parent: unknown, statement: InboxStatement, values: InboxValues): Promise<InboxResult> => {
    const request = new mssql.Request(parent);
    request.arrayRowMode = true;
    for (const name of statement.parameters) {
      request.input(name, types[name] as never, values[name]);
    }
    const result = await request.query(statement.text);
    const rows = Array.isArray(result.recordset) ? (result.recordset as unknown[][]) : [];
    const rowCount = (result.rowsAffected ?? []).reduce((sum, n) => sum + n, 0);
    return { rows, rowCount };
  };
  return {
    dialect: "sqlserver",
    execute: (statement, values) => run(pool, statement, values),
    begin: async (): Promise<InboxTransaction<Transaction>> => {
      const tx = new mssql.Transaction(pool);
      await tx.begin();
      let ended = false;
      const end = async (how: "commit" | "rollback"): Promise<void> => {
        if (ended) {
          throw new Error(`queuebox-inbox: ${how} on a transaction that has ended`);
        }
        ended = true;
        await tx[how]();
      };
      return {
        handle: tx,
        execute: (statement, values) => run(tx, statement, values),
        commit: () => end("commit"),
        rollback: () => end("rollback"),
        destroy: () => {
          // mssql cannot close the connection of a transaction from outside; a rollback is the
          // best it has, and it fails while a request of the handler is still running. The
          // transaction then ends when that request does, and never commits.
          if (!ended) {
            ended = true;
            tx.rollback().catch(() => undefined);
          }
        },
      };
    },
    isTransientClaimError: (error) => errorNumber(error) === CLAIM_LOCK_ERROR,
    warnings: (options: ResolvedInboxOptions) => {
      const timeout = (pool as { config?: { requestTimeout?: unknown } }).config?.requestTimeout;
      const out: string[] = [];
      if (typeof timeout !== "number" || timeout < MIN_REQUEST_TIMEOUT_MS) {
        out.push(
          `the mssql requestTimeout is ${typeof timeout === "number" ? timeout : "the default 15000"} ms; ` +
            "set it to at least 30000, so that the server raises Msg 51000 before the driver gives up on a claim",
        );
      }
      const max = (pool as { config?: { pool?: { max?: unknown } } }).config?.pool?.max;
      if (typeof max === "number" && max < options.maxConcurrency + 2) {
        out.push(`the mssql pool has ${max} connections; give it at least maxConcurrency + 2 = ${options.maxConcurrency + 2}`);
      }
      return out;
    },
  };
}

/** The SQL Server error number of an mssql error, or undefined. */
function errorNumber(error: unknown): number | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && typeof current === "object" && current !== null; depth++) {
    const { number, info, originalError } = current as { number?: unknown; info?: { number?: unknown }; originalError?: unknown };
    if (typeof number === "number") {
      return number;
    }
    if (typeof info?.number === "number") {
      return info.number;
    }
    current = originalError;
  }
  return undefined;
}

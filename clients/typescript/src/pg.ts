/**
 * The adapter for node-postgres (`pg`). The package imports no driver: the application passes
 * its own pool.
 *
 * @module
 */

import type { InboxConnection, InboxResult, InboxTransaction, InboxValues } from "./connection.js";
import type { ResolvedInboxOptions } from "./options.js";
import type { InboxStatement } from "./sql.js";

/** The part of a `pg` query result that the library reads. */
export interface PgResult {
  rows: any[];
  rowCount: number | null;
}

/** The part of a `pg` client (a `pg.PoolClient`) that the library and a handler use. */
export interface PgClient {
  query(text: string, values?: unknown[]): Promise<PgResult>;
  query(config: { text: string; values?: unknown[]; rowMode: "array" }): Promise<PgResult>;
  release(error?: Error | boolean): void;
}

/** The part of a `pg.Pool` that the library uses. */
export interface PgPool {
  connect(): Promise<PgClient>;
  query(config: { text: string; values?: unknown[]; rowMode: "array" }): Promise<PgResult>;
}

/**
 * The client type of a pool: `pg.PoolClient` for a `pg.Pool` (whose `connect` has a promise and
 * a callback overload), the promised client for a pool with one `connect`, else {@link PgClient}.
 */
export type PgClientOf<Pool> = Pool extends {
  connect(): Promise<infer Client>; connect(callback: (...args: any[]) => void): void;
}
  ? Client extends PgClient ? Client : PgClient
  : Pool extends { connect(): Promise<infer Client> }
    ? Client extends PgClient ? Client : PgClient
    : PgClient;

/**
 * The adapter for a `pg` pool. The claim, the renewals, the retries and the dead letters run
 * with `pool.query`, each on a pooled connection of its own; each handler gets a pool client
 * with an open transaction (`BEGIN`), on which it runs `tx.query(...)`.
 *
 * Give the pool at least `maxConcurrency + 2` connections: one per running handler, one for the
 * claim and one for the renewals.
 *
 * @example
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const worker = new InboxWorker(fromPg(pool), { source: "orders" });
 */
export function fromPg<Pool extends PgPool>(pool: Pool): InboxConnection<PgClientOf<Pool>> {
  if (typeof pool !== "object" || pool === null || typeof pool.connect !== "function" || typeof pool.query !== "function") {
    throw new TypeError("queuebox-inbox: fromPg needs a pg.Pool");
  }
  return {
    dialect: "postgresql",
    execute: (statement, values) => run(pool, statement, values),
    begin: () => begin<PgClientOf<Pool>>(pool),
    warnings: (options) => poolWarnings(pool, options),
  };
}

/** The event methods of a `pg` client, when it has them. */
interface ErrorEvents {
  on?(event: "error", listener: (error: unknown) => void): unknown;
  removeListener?(event: "error", listener: (error: unknown) => void): unknown;
}

/** Keeps the "error" event of a checked-out client from ending the process (see begin). */
function ignoreError(): void {}

async function begin<Client extends PgClient>(pool: PgPool): Promise<InboxTransaction<Client>> {
  const client = (await pool.connect()) as Client;
  // A pg pool listens to the "error" event of its idle clients only. A connection that drops
  // while a handler holds its transaction and runs no query (the database restarts, the network
  // fails) would emit an "error" that nothing handles, and end the process. The transaction's
  // next statement fails instead; the pool listens again once the client is released.
  const events = client as unknown as ErrorEvents;
  events.on?.("error", ignoreError);
  let released = false;
  const release = (error?: Error): void => {
    if (!released) {
      released = true;
      events.removeListener?.("error", ignoreError);
      client.release(error);
    }
  };
  try {
    await client.query("BEGIN");
  } catch (error) {
    release(error instanceof Error ? error : new Error(String(error)));
    throw error;
  }
  const finish = async (command: "COMMIT" | "ROLLBACK"): Promise<void> => {
    if (released) {
      throw new Error(`queuebox-inbox: ${command} on a transaction that has ended`);
    }
    try {
      await client.query(command);
    } catch (error) {
      // A connection in an unknown state does not go back to the pool.
      release(error instanceof Error ? error : new Error(String(error)));
      throw error;
    }
    release();
  };
  return {
    handle: client,
    execute: (statement, values) => run(client, statement, values),
    commit: () => finish("COMMIT"),
    rollback: () => finish("ROLLBACK"),
    destroy: (reason) => release(reason),
  };
}

async function run(target: Pick<PgClient, "query"> | PgPool, statement: InboxStatement, values: InboxValues): Promise<InboxResult> {
  const result = await target.query({
    text: statement.text,
    values: statement.parameters.map((name) => values[name]),
    rowMode: "array",
  });
  return { rows: result.rows ?? [], rowCount: result.rowCount ?? 0 };
}

function poolWarnings(pool: object, options: ResolvedInboxOptions): string[] {
  const max = (pool as { options?: { max?: unknown } }).options?.max;
  if (typeof max === "number" && max < options.maxConcurrency + 2) {
    return [
      `the pg pool has ${max} connections; give it at least maxConcurrency + 2 = ${options.maxConcurrency + 2}, ` +
        "so that the claim and the lease renewals never wait behind the handlers",
    ];
  }
  return [];
}

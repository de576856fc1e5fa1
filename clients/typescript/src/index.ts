/**
 * `@alternayte/queuebox-inbox`: the pull worker for QueueBox inbox rows. It claims the rows of
 * one `consumption: pull` source, runs your handler in a transaction, and completes, retries or
 * dead-letters each row, with the SQL of the QueueBox pull contract. It imports no database
 * driver: pass your `pg` pool through {@link fromPg}, or the `mssql` module and your pool
 * through {@link fromMssql}.
 *
 * @example
 * import pg from "pg";
 * import { InboxWorker, fromPg } from "@alternayte/queuebox-inbox";
 *
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const worker = new InboxWorker(fromPg(pool), { source: "orders" });
 * await worker.run(async (message, tx) => {
 *   const order = message.payload as { id: string; total: number };
 *   await tx.query("INSERT INTO orders (id, total) VALUES ($1, $2)", [order.id, order.total]);
 * }, stopping.signal);
 *
 * It also writes the outbox side: {@link enqueue} inserts an outbox row in your `pg` or `mssql`
 * transaction, with the pitfalls of hand-written inserts refused.
 *
 * @packageDocumentation
 */

export { InboxWorker, InboxCancelledError, type InboxHandler, type InboxCancelReason } from "./worker.js";
export type { InboxMessage } from "./message.js";
export { resolveOptions, type InboxOptions, type ResolvedInboxOptions, type InboxLogger, type InboxTracerProvider } from "./options.js";
export {
  defaultRetryPolicy,
  retryAfter,
  deadLetter,
  type InboxRetryPolicy,
  type InboxFailureAction,
  type InboxRetry,
  type InboxDeadLetter,
  type DefaultRetryPolicyOptions,
} from "./policy.js";
export {
  inboxSql,
  defaultSchema,
  type InboxSchema,
  type InboxDialect,
  type InboxStatement,
  type InboxStatements,
  type InboxStatementName,
  type InboxParameterName,
} from "./sql.js";
export { sanitize, sanitizeError, MAX_ERROR_LENGTH } from "./redact.js";
export { fromPg, type PgPool, type PgClient, type PgClientOf, type PgResult } from "./pg.js";
export { fromMssql, type MssqlModule, type MssqlRequest, type MssqlTransaction } from "./mssql.js";
export type { InboxConnection, InboxTransaction, InboxResult, InboxValues } from "./connection.js";
export {
  enqueue,
  encodePayload,
  encodeHeaders,
  outboxStatement,
  resolveOutboxSchema,
  defaultOutboxSchema,
  OutboxMessageError,
  MAX_TEXT_LENGTH,
  MAX_ATTEMPTS_LIMIT,
  MAX_DELAY_MS,
  type OutboxMessage,
  type OutboxSchema,
  type EnqueueOptions,
  type OutboxTransaction,
  type OutboxPgClient,
  type OutboxMssqlTransaction,
  type OutboxMssqlRequest,
} from "./outbox.js";

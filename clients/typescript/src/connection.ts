/**
 * The seam between the worker and a database driver. {@link fromPg} and {@link fromMssql}
 * implement it; an application with another driver can implement it too.
 *
 * @module
 */

import type { ResolvedInboxOptions } from "./options.js";
import type { InboxDialect, InboxParameterName, InboxStatement } from "./sql.js";

/** The values of one statement, by parameter name. */
export type InboxValues = Readonly<Partial<Record<InboxParameterName, string | number>>>;

/** The outcome of one statement. */
export interface InboxResult {
  /** The rows that the statement returned, each as an array of column values in select order. */
  readonly rows: readonly (readonly unknown[])[];
  /** The number of rows that the statement changed. */
  readonly rowCount: number;
}

/**
 * A database connection source for a worker. The worker calls it from several asynchronous
 * tasks at once: a claim, the renewals of every running message and the transactions of the
 * handlers, so `execute` and `begin` must each use a connection of their own (a pool).
 *
 * @typeParam Tx - What the handler receives as its transaction, for example a `pg` pool client.
 */
export interface InboxConnection<Tx> {
  /** The dialect of the database. */
  readonly dialect: InboxDialect;
  /**
   * Runs one statement on a connection of its own, outside any transaction of the caller, so
   * that it commits on its own (autocommit), and returns its rows and its row count. It binds
   * `values[statement.parameters[i]]` to each parameter.
   */
  execute(statement: InboxStatement, values: InboxValues): Promise<InboxResult>;
  /** Opens a transaction on a connection of its own, for one handler. */
  begin(): Promise<InboxTransaction<Tx>>;
  /**
   * Reports whether a claim error is transient and expected under load: Msg 51000 on SQL
   * Server, the per-source claim lock that did not come within 10 seconds. The worker backs
   * off after any claim error; a transient one is logged as a warning, not as an error.
   */
  isTransientClaimError?(error: unknown): boolean;
  /** Problems of the driver set-up that the worker logs as warnings when it starts. */
  warnings?(options: ResolvedInboxOptions): string[];
}

/** One open transaction, owned by the worker. */
export interface InboxTransaction<Tx> {
  /** The object that the handler receives. */
  readonly handle: Tx;
  /** Runs one statement inside the transaction. */
  execute(statement: InboxStatement, values: InboxValues): Promise<InboxResult>;
  /** Commits and gives the connection back. */
  commit(): Promise<void>;
  /** Rolls back and gives the connection back. */
  rollback(): Promise<void>;
  /**
   * Ends the transaction without waiting for the handler, so that nothing it wrote can commit:
   * for `pg`, the connection is closed and the server rolls the transaction back. The worker
   * calls it for a handler that did not return soon after its signal aborted.
   */
  destroy(reason: Error): void;
}

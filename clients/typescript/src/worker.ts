/**
 * The pull worker: claims the rows of one source, runs the handler in a transaction, and
 * completes, retries or dead-letters each row, as `examples/pull/README.md` of the QueueBox
 * repository states.
 *
 * @module
 */

import type { InboxConnection, InboxTransaction } from "./connection.js";
import { decodeMessage, fallbackMessage } from "./decode.js";
import { leaseSpanMs } from "./lease.js";
import type { InboxMessage } from "./message.js";
import { resolveOptions, type InboxLogger, type InboxOptions, type ResolvedInboxOptions } from "./options.js";
import { defaultRetryPolicy, retryAfter, type InboxFailureAction, type InboxRetryPolicy } from "./policy.js";
import { sanitize, sanitizeError } from "./redact.js";
import { inboxSql, type InboxStatements } from "./sql.js";
import { loadOtelApi, startHandlerSpan, type HandlerResult } from "./tracing.js";

/**
 * Handles one message. Write every change through `tx`, the open transaction that the library
 * commits together with the completion; do not commit or roll it back. Throw (or reject) to fail
 * the message. `signal` aborts when the lease is lost, when the lease's local deadline passes
 * (the time the claim or the last renewal that succeeded was sent, plus `leaseMs`, minus a fifth
 * of `leaseMs`, at most 10 seconds: before another worker can take the message), and when a
 * shutdown runs out of grace. Stop then, and pass `signal` to every call that leaves the process,
 * because nothing that the handler writes afterwards can commit.
 */
export type InboxHandler<Tx> = (message: InboxMessage, tx: Tx, signal: AbortSignal) => Promise<void> | void;

/** Why the signal of a handler aborted. */
export type InboxCancelReason = "lease-lost" | "shutdown";

/**
 * The reason of an aborted handler signal (`signal.reason`). Its `name` is `"AbortError"`, as
 * for `fetch` and the timers of Node.
 */
export class InboxCancelledError extends Error {
  /**
   * `"lease-lost"` when another worker may own the message (a renewal changed no row or failed,
   * or the lease's local deadline passed before a renewal succeeded), `"shutdown"` when the grace
   * ran out.
   */
  readonly cancelReason: InboxCancelReason;

  constructor(cancelReason: InboxCancelReason) {
    super(
      cancelReason === "lease-lost"
        ? "queuebox-inbox: the lease on the message was lost, or its local deadline passed; the handler's writes roll back"
        : "queuebox-inbox: the worker stopped and the shutdown grace ran out; the handler's writes roll back",
    );
    this.name = "AbortError";
    this.cancelReason = cancelReason;
  }
}

/**
 * How long a cancelled handler has to return before the library ends its transaction without
 * it (closing the connection, so nothing it wrote can commit) and stops waiting for it.
 */
const ABANDON_AFTER_MS = 1000;

/** The longest wait between two claims that failed. */
const MAX_BACKOFF_MS = 30_000;

/**
 * A worker for one `consumption: pull` source. It claims up to `batchSize` rows at a time and
 * runs at most `maxConcurrency` handlers at once. It holds at most
 * `batchSize + maxConcurrency - 1` rows, running or waiting for a free handler slot, and claims
 * the next rows while the handlers run, within that bound. For each row it:
 *
 * 1. claims the row in a statement of its own, committed before the handler starts;
 * 2. renews the lease every third of `leaseMs`, on a connection of its own; a renewal that
 *    changes no row, or that fails, means that the lease is lost, and aborts the handler;
 * 3. opens a transaction and calls the handler with the message, the transaction and a signal;
 * 4. when the handler returns, runs the completion in that transaction and commits, but only if
 *    the completion changed exactly one row; otherwise the lease was lost, and it rolls back;
 * 5. when the handler throws, rolls back, asks the retry policy, and runs the retry or the
 *    dead letter with the redacted error, fenced by the claim token.
 *
 * @typeParam Tx - What the handler receives as its transaction; a `pg` client for
 *   {@link fromPg}, an `mssql.Transaction` for {@link fromMssql}.
 */
export class InboxWorker<Tx = unknown> {
  readonly #connection: InboxConnection<Tx>;
  readonly #options: ResolvedInboxOptions;
  readonly #sql: InboxStatements;
  #running = false;

  /**
   * Builds a worker. It throws a `TypeError` or a `RangeError` for a setting that cannot work
   * (see {@link resolveOptions}). The dialect defaults to the adapter's; a dialect option that
   * contradicts the adapter is an error.
   */
  constructor(connection: InboxConnection<Tx>, options: InboxOptions) {
    if (typeof connection !== "object" || connection === null || typeof connection.execute !== "function" || typeof connection.begin !== "function") {
      throw new TypeError("queuebox-inbox: the connection must be an adapter such as fromPg(pool) or fromMssql(mssql, pool)");
    }
    const dialect = options?.dialect ?? connection.dialect;
    const resolved = resolveOptions({ ...options, dialect });
    if (connection.dialect !== undefined && connection.dialect !== resolved.dialect) {
      throw new TypeError(
        `queuebox-inbox: dialect is ${JSON.stringify(resolved.dialect)} but the connection speaks ${JSON.stringify(connection.dialect)}`,
      );
    }
    this.#connection = connection;
    this.#options = resolved;
    this.#sql = inboxSql(resolved.dialect, resolved.schema);
  }

  /** The settings of this worker, with the defaults filled in. */
  get options(): ResolvedInboxOptions {
    return this.#options;
  }

  /**
   * Claims and handles rows until `signal` aborts. A stop ends the claims at once and gives the
   * running handlers `shutdownGraceMs`; then it aborts their signals, completes nothing for them
   * and spends no attempt, so their leases expire and another worker takes the rows. The
   * promise resolves when every handler has returned or has been abandoned (a handler that does
   * not return within a second of its signal loses its transaction). Claim errors do not end the
   * run: the worker logs them and backs off.
   */
  async run(handler: InboxHandler<Tx>, signal?: AbortSignal): Promise<void> {
    if (typeof handler !== "function") {
      throw new TypeError("queuebox-inbox: run needs a handler function (message, tx, signal) => Promise<void>");
    }
    if (this.#running) {
      throw new Error("queuebox-inbox: this worker is already running; build one worker per run");
    }
    this.#running = true;
    try {
      await new Run(this.#connection, this.#options, this.#sql, handler, signal).execute();
    } finally {
      this.#running = false;
    }
  }
}

type Level = "info" | "warn" | "error";

/** Writes one redacted log line. A logger that throws is ignored. */
function log(logger: InboxLogger | undefined, level: Level, message: string, fields: Record<string, unknown>): void {
  if (logger === undefined) {
    return;
  }
  const clean: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (key === "error" || value instanceof Error) {
      clean[key] = sanitizeError(value);
    } else if (typeof value === "string") {
      clean[key] = sanitize(value);
    } else {
      clean[key] = value;
    }
  }
  try {
    logger[level](sanitize(message), clean);
  } catch {
    // A broken logger must not break the worker.
  }
}

/** One call of run: the claim loop and the messages in flight. */
class Run<Tx> {
  /** The rows whose handler runs. */
  readonly #jobs = new Set<Job<Tx>>();
  /** The claimed rows that wait for a free handler slot, oldest first. */
  #waiting: Job<Tx>[] = [];
  #stopping = false;
  /** Ends the current pause: set while the claim loop pauses. */
  #wake: (() => void) | undefined;
  /** Ends the current pause when a handler ends: set while the claim loop waits for a slot. */
  #slotFreed: (() => void) | undefined;

  constructor(
    readonly connection: InboxConnection<Tx>,
    readonly options: ResolvedInboxOptions,
    readonly sql: InboxStatements,
    readonly handler: InboxHandler<Tx>,
    readonly signal: AbortSignal | undefined,
  ) {}

  log(level: Level, message: string, fields: Record<string, unknown> = {}): void {
    log(this.options.logger, level, message, { source: this.options.source, ...fields });
  }

  async execute(): Promise<void> {
    if (this.signal?.aborted) {
      return;
    }
    const onAbort = (): void => {
      this.#stopping = true;
      this.#wake?.();
    };
    this.signal?.addEventListener("abort", onAbort, { once: true });
    const { batchSize, leaseMs, maxConcurrency, dialect } = this.options;
    this.log("info", "inbox pull worker started", { dialect, batch_size: batchSize, lease_ms: leaseMs, max_concurrency: maxConcurrency });
    try {
      let warnings: string[] = [];
      try {
        warnings = this.connection.warnings?.(this.options) ?? [];
      } catch {
        // A check of the set-up must not stop the worker.
      }
      for (const warning of warnings) {
        this.log("warn", warning);
      }
      await this.#claimLoop();
    } finally {
      this.signal?.removeEventListener("abort", onAbort);
    }
    await this.#drain();
    this.log("info", "inbox pull worker stopped");
  }

  /** Waits `ms` milliseconds, or less when the run stops or, with `onSlot`, when a handler ends. */
  async #pause(ms: number, onSlot: boolean): Promise<void> {
    if (this.#stopping) {
      return;
    }
    await new Promise<void>((resolve) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const done = (): void => {
        clearTimeout(timer);
        this.#wake = undefined;
        this.#slotFreed = undefined;
        resolve();
      };
      // Without a timer (waiting for a slot), the running handlers keep the process alive.
      if (Number.isFinite(ms)) {
        timer = setTimeout(done, ms);
      }
      this.#wake = done;
      this.#slotFreed = onSlot ? done : undefined;
    });
  }

  async #claimLoop(): Promise<void> {
    const { batchSize, maxConcurrency, leaseMs, pollIntervalMs, source } = this.options;
    const limit = batchSize + maxConcurrency - 1;
    let failures = 0;
    while (!this.#stopping) {
      // Claim as soon as fewer than maxConcurrency rows wait, so that the next rows are there
      // when the running handlers finish, within the bound of held rows; no earlier: every
      // claim costs the database a commit, a plan and a walk over the index entries of the
      // rows claimed since the last vacuum, so fewer, larger claims go further.
      const room = limit - this.#jobs.size - this.#waiting.length;
      if (room < 1 || this.#waiting.length >= maxConcurrency) {
        await this.#pause(Infinity, true);
        continue;
      }
      const batch = Math.min(batchSize, room);
      const claimedFrom = performance.now();
      let rows: readonly (readonly unknown[])[];
      try {
        const result = await this.connection.execute(this.sql.claim, {
          source,
          batch,
          lease_ms: leaseMs,
          cand_limit: Math.min(Math.max(3 * batch, 50), 500),
        });
        rows = result.rows;
        failures = 0;
      } catch (error) {
        failures++;
        const transient = this.connection.isTransientClaimError?.(error) ?? false;
        const wait = Math.min(Math.max(pollIntervalMs, 100) * 2 ** Math.min(failures - 1, 16), MAX_BACKOFF_MS);
        this.log(transient ? "warn" : "error", transient ? "the claim lock of the source is busy; backing off" : "claiming inbox messages", {
          error,
          backoff_ms: wait,
        });
        await this.#pause(wait, false);
        continue;
      }
      if (this.#stopping && rows.length > 0) {
        // A claim that was under way when the stop came: its rows start no handler, spend no
        // attempt, and go back to the source when their leases expire.
        this.log("info", "the stop came during a claim: leaving the claimed rows to their leases", { claimed: rows.length });
        break;
      }
      for (const row of rows) {
        // The lease of a row runs, and is renewed, from the claim on, while it waits too.
        const job = new Job(this, row, claimedFrom);
        job.hold();
        this.#waiting.push(job);
      }
      this.#dispatch();
      if (rows.length === 0) {
        await this.#pause(pollIntervalMs, false);
      }
    }
    await this.#dropWaiting();
  }

  /** Starts a handler for each waiting row while a slot is free. Starts nothing after a stop. */
  #dispatch(): void {
    const { maxConcurrency } = this.options;
    while (!this.#stopping && this.#jobs.size < maxConcurrency && this.#waiting.length > 0) {
      const job = this.#waiting.shift()!;
      if (!job.live()) {
        // The lease was lost, or its local deadline passed, while the row waited for a slot
        // (or before the claim's answer came): the row is not handed to the handler.
        void job.release();
        this.log("warn", "the lease of a claimed row was lost, or its local deadline passed, before its handler started; it spends no attempt", { message_id: job.id });
        continue;
      }
      this.#start(job);
    }
  }

  #start(job: Job<Tx>): void {
    this.#jobs.add(job);
    job.finished = job
      .process()
      .catch((error: unknown) => this.log("error", "handling an inbox message", { message_id: job.id, error }))
      .finally(() => {
        this.#jobs.delete(job);
        this.#dispatch();
        this.#slotFreed?.();
      });
    // A slot was taken from the waiting rows: the claim loop may claim again.
    this.#slotFreed?.();
  }

  /**
   * Leaves the rows that were claimed but did not start to their leases: their renewals stop,
   * they spend no attempt, and another worker takes them when their leases expire.
   */
  async #dropWaiting(): Promise<void> {
    const left = this.#waiting;
    this.#waiting = [];
    if (left.length === 0) {
      return;
    }
    await Promise.all(left.map((job) => job.release()));
    this.log("info", "stopping: leaving claimed rows that did not start to their leases", { rows: left.length });
  }

  /** Gives the running handlers the grace, then cancels those that are left. */
  async #drain(): Promise<void> {
    if (this.#jobs.size === 0) {
      return;
    }
    const { shutdownGraceMs } = this.options;
    this.log("info", "stopping: waiting for the running handlers", { running: this.#jobs.size, grace_ms: shutdownGraceMs });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const graceOver = await Promise.race([
      Promise.all([...this.#jobs].map((job) => job.finished)).then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), shutdownGraceMs);
      }),
    ]);
    clearTimeout(timer);
    if (!graceOver) {
      return;
    }
    const left = [...this.#jobs];
    this.log("warn", "the shutdown grace ran out: cancelling the running handlers; their leases will expire", { running: left.length });
    for (const job of left) {
      job.cancel("shutdown");
    }
    await Promise.all(left.map((job) => Promise.race([job.finished, job.abandoned])));
  }
}

/** One claimed row, from the claim to the completion, the retry or the dead letter. */
class Job<Tx> {
  readonly id: string;
  readonly #token: string;
  readonly #controller = new AbortController();
  readonly #run: Run<Tx>;
  readonly #row: readonly unknown[];
  finished: Promise<void> = Promise.resolve();
  readonly abandoned: Promise<void>;
  #resolveAbandoned!: () => void;

  #tx: InboxTransaction<Tx> | undefined;
  #started = false;
  #handlerSettled = false;
  #destroyed = false;
  #cancelReason: InboxCancelReason | undefined;

  // The lease.
  #leaseConfirmedAt: number;
  #renewTimer: ReturnType<typeof setTimeout> | undefined;
  #deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  #renewing: Promise<void> | undefined;
  #renewalStopped = false;

  constructor(run: Run<Tx>, row: readonly unknown[], claimedFrom: number) {
    this.#run = run;
    this.#row = row;
    this.id = String(row[0]);
    this.#token = String(row[9]);
    this.#leaseConfirmedAt = claimedFrom;
    this.abandoned = new Promise((resolve) => {
      this.#resolveAbandoned = resolve;
    });
  }

  #log(level: Level, message: string, fields: Record<string, unknown> = {}): void {
    this.#run.log(level, message, { message_id: this.id, ...fields });
  }

  /** The local deadline of the lease, on the clock of `performance.now()`. */
  #deadline(): number {
    return this.#leaseConfirmedAt + leaseSpanMs(this.#run.options.leaseMs);
  }

  /**
   * Whether the work on the row may go on: not cancelled, and its local deadline has not
   * passed. It does not trust the deadline's timer alone, which fires late when the event loop
   * is busy: a deadline found passed here cancels the handler at once.
   */
  live(): boolean {
    if (this.#cancelReason !== undefined) {
      return false;
    }
    if (performance.now() >= this.#deadline()) {
      this.#leaseLost("its local deadline passed before a renewal succeeded");
      return false;
    }
    return true;
  }

  /** Starts the renewals and the local lease deadline: the row is held from its claim on. */
  hold(): void {
    this.#startRenewal();
  }

  /** Gives up a row that did not start: stops its renewals; its lease expires. */
  async release(): Promise<void> {
    await this.#stopRenewal();
    this.#resolveAbandoned();
  }

  async process(): Promise<void> {
    const { connection, handler } = this.#run;
    this.#started = true;
    let message: InboxMessage;
    try {
      message = decodeMessage(this.#row, connection.dialect);
    } catch (error) {
      // A row whose payload or headers do not parse fails like a handler would.
      await this.#stopRenewal();
      await this.#recordFailure(fallbackMessage(this.#row), error);
      return;
    }
    const span = startHandlerSpan(await loadOtelApi(), this.#run.options.tracerProvider, message);
    let tx: InboxTransaction<Tx>;
    try {
      tx = await connection.begin();
    } catch (error) {
      // Nothing ran for the row: no attempt is spent, and the lease expires.
      await this.#stopRenewal();
      span.end("error", error);
      this.#log("error", "opening the handler transaction; the lease will expire", { error });
      return;
    }
    this.#tx = tx;
    let failure: { error: unknown } | undefined;
    if (this.live()) {
      try {
        await span.run(() => handler(message, tx.handle, this.#controller.signal));
      } catch (error) {
        failure = { error };
      }
    }
    this.#handlerSettled = true;
    this.live(); // a deadline that passed while the handler ran cancels it, whatever it returned
    if (this.#destroyed) {
      await this.#stopRenewal();
      span.end("cancelled", failure?.error ?? "the transaction was closed");
      this.#log("warn", "the handler returned after its transaction was closed", failure ? { error: failure.error } : {});
      return;
    }
    if (failure === undefined && this.#cancelReason === undefined) {
      const result = await this.#complete(tx);
      span.end(result, result === "completed" ? undefined : result);
      return;
    }
    await this.#rollback(tx);
    await this.#stopRenewal();
    if (this.#cancelReason !== undefined) {
      span.end(this.#cancelReason === "lease-lost" ? "lease_lost" : "cancelled", this.#cancelReason);
      this.#log(this.#cancelReason === "lease-lost" ? "warn" : "info", this.#cancelReason === "lease-lost"
        ? "the lease was lost, or its local deadline passed, while the handler ran; its writes rolled back and no attempt was spent"
        : "the handler was cancelled by the shutdown; its writes rolled back and no attempt was spent");
      return;
    }
    span.end("failed", failure!.error);
    await this.#recordFailure(message, failure!.error);
  }

  /**
   * Runs the completion in the handler's transaction and commits when it changed exactly one
   * row; answers the result of the handler span.
   */
  async #complete(tx: InboxTransaction<Tx>): Promise<HandlerResult> {
    await this.#stopRenewal();
    if (!this.live()) {
      await this.#rollback(tx);
      this.#log("warn", "the lease was lost, or its local deadline passed, before the completion; the handler's writes rolled back and no attempt was spent");
      return "lease_lost";
    }
    let changed: number;
    try {
      changed = (await tx.execute(this.#run.sql.complete, { id: this.id, token: this.#token })).rowCount;
    } catch (error) {
      await this.#rollback(tx);
      this.#log("error", "completing the message; the handler's writes rolled back and the lease will expire", { error });
      return "error";
    }
    if (changed !== 1) {
      await this.#rollback(tx);
      this.#log("warn", "the lease was lost: the completion changed no row; the handler's writes rolled back");
      return "lease_lost";
    }
    // The last moment to stop: COMMIT is sent only before the local deadline.
    if (!this.live()) {
      await this.#rollback(tx);
      this.#log("warn", "the lease's local deadline passed before the commit; the handler's writes and the completion rolled back, and the message runs again after its lease");
      return "lease_lost";
    }
    try {
      await tx.commit();
    } catch (error) {
      this.#log("error", "committing the handler's transaction with the completion", { error });
      return "error";
    }
    return "completed";
  }

  /** Asks the policy and runs the retry or the dead letter on a connection of its own. */
  async #recordFailure(message: InboxMessage, failure: unknown): Promise<void> {
    const { connection, options, sql } = this.#run;
    const action = await this.#decide(options.retryPolicy, message, failure);
    const error = sanitizeError(failure);
    if (!this.live()) {
      // After the local deadline another worker may own the row: write nothing to it.
      this.#log("warn", "the handler failed, and the lease's local deadline passed before the failure was recorded; no attempt was spent, and the lease will expire", { attempt: message.attempt, error });
      return;
    }
    try {
      const result =
        action.kind === "retry"
          ? await connection.execute(sql.retry, { id: this.id, token: this.#token, delay_ms: action.delayMs, error })
          : await connection.execute(sql.dead, { id: this.id, token: this.#token, error });
      if (result.rowCount !== 1) {
        this.#log("warn", "the lease was lost before the failure was recorded", { attempt: message.attempt, error });
      } else if (action.kind === "retry") {
        this.#log("warn", "the handler failed; the message will be retried", { attempt: message.attempt, delay_ms: action.delayMs, error });
      } else {
        this.#log("error", "the handler failed; the message is dead", { attempt: message.attempt, error });
      }
    } catch (dbError) {
      this.#log("error", `recording the handler failure (${action.kind}); the lease will expire`, { error: dbError, handler_error: error });
    }
  }

  async #decide(policy: InboxRetryPolicy, message: InboxMessage, failure: unknown): Promise<InboxFailureAction> {
    try {
      const action: unknown = await policy(message, failure);
      if (isAction(action)) {
        return action.kind === "retry" ? retryAfter(action.delayMs) : action;
      }
      this.#log("error", "the retry policy returned neither retryAfter(ms) nor deadLetter(); using the default policy");
    } catch (error) {
      this.#log("error", "the retry policy threw; using the default policy", { error });
    }
    return defaultPolicy(message, failure);
  }

  async #rollback(tx: InboxTransaction<Tx>): Promise<void> {
    try {
      await tx.rollback();
    } catch (error) {
      this.#log("warn", "rolling back the handler's transaction", { error });
    }
  }

  /** Aborts the handler's signal. A handler that has not returned a second later loses its transaction. */
  cancel(reason: InboxCancelReason): void {
    if (this.#cancelReason !== undefined) {
      return;
    }
    this.#cancelReason = reason;
    this.#controller.abort(new InboxCancelledError(reason));
    if (!this.#started) {
      // No handler runs yet: the dispatcher skips the row and releases it.
      return;
    }
    const timer = setTimeout(() => {
      if (this.#handlerSettled) {
        return;
      }
      if (this.#tx !== undefined) {
        this.#destroyed = true;
        this.#tx.destroy(new InboxCancelledError(reason));
      }
      this.#log("warn", `the handler did not return within ${ABANDON_AFTER_MS} ms of its cancellation; its transaction was closed`);
      this.#resolveAbandoned();
    }, ABANDON_AFTER_MS);
    void this.finished.finally(() => clearTimeout(timer));
  }

  #startRenewal(): void {
    this.#scheduleRenewal(this.#renewInterval());
    this.#armDeadline();
  }

  #renewInterval(): number {
    return Math.max(1, Math.floor(this.#run.options.leaseMs / 3));
  }

  #scheduleRenewal(delay: number): void {
    clearTimeout(this.#renewTimer);
    if (!this.#renewalStopped) {
      this.#renewTimer = setTimeout(() => {
        this.#renewing = this.#renew();
      }, delay);
    }
  }

  /**
   * Arms the timer of the local deadline: the time the claim or the last renewal that
   * succeeded was sent, plus the lease, minus its margin ({@link leaseSpanMs}).
   */
  #armDeadline(): void {
    clearTimeout(this.#deadlineTimer);
    const remaining = this.#deadline() - performance.now();
    this.#deadlineTimer = setTimeout(() => this.#leaseLost("its local deadline passed before a renewal succeeded"), Math.max(0, remaining));
  }

  async #renew(): Promise<void> {
    if (this.#renewalStopped) {
      return;
    }
    const { connection, options, sql } = this.#run;
    const started = performance.now();
    try {
      const result = await connection.execute(sql.renew, { id: this.id, token: this.#token, lease_ms: options.leaseMs });
      if (result.rowCount !== 1) {
        this.#leaseLost("the renewal changed no row");
        return;
      }
      if (!this.live()) {
        return; // an answer that came after the deadline moves nothing: the handler was told to stop
      }
      this.#leaseConfirmedAt = started;
      if (!this.#renewalStopped) {
        this.#armDeadline();
        this.#scheduleRenewal(this.#renewInterval());
      }
    } catch (error) {
      // A renewal that fails (a timeout, a refused or broken connection, a statement that the
      // database refuses) loses the lease as one that changes no row does: the worker cannot
      // tell that it still holds the row. The local deadline is left for a renewal that never
      // answers.
      this.#leaseLost("the renewal failed", { error });
    }
  }

  #leaseLost(why: string, fields: Record<string, unknown> = {}): void {
    if (this.#cancelReason !== undefined) {
      return;
    }
    clearTimeout(this.#deadlineTimer);
    clearTimeout(this.#renewTimer);
    this.#renewalStopped = true;
    this.#log("warn", `the lease was lost: ${why}; cancelling the handler`, fields);
    this.cancel("lease-lost");
  }

  /** Stops the renewals and waits for one that is in flight, so that it cannot race the end of the row. */
  async #stopRenewal(): Promise<void> {
    this.#renewalStopped = true;
    clearTimeout(this.#renewTimer);
    clearTimeout(this.#deadlineTimer);
    if (this.#renewing !== undefined) {
      await this.#renewing;
    }
  }
}

const defaultPolicy = defaultRetryPolicy();

function isAction(value: unknown): value is InboxFailureAction {
  if (typeof value !== "object" || value === null) {
    return false;
  }
  const { kind, delayMs } = value as { kind?: unknown; delayMs?: unknown };
  return kind === "dead" || (kind === "retry" && typeof delayMs === "number" && !Number.isNaN(delayMs));
}

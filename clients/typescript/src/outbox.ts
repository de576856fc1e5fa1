/**
 * `enqueue`: one call that writes a QueueBox outbox row inside the application's transaction,
 * with the column mapping of a renamed outbox table (spec/15), on `pg` or `mssql`.
 *
 * spec/17 ("Write outbox rows") leaves the insert to the application's SQL and lists what goes
 * wrong when it is written by hand. `enqueue` prevents each of them: the payload is encoded to
 * JSON exactly once (a string that already holds JSON is refused as encoded twice), `headers`
 * is never NULL (`{}` when there is none), the key and the aggregate type must be strings, and
 * `maxAttempts` and `delayMs` are checked against their bounds, all before anything is sent.
 * The row is written through the transaction it is given, so it commits or rolls back with the
 * business write.
 *
 * @module
 */

/** The part of a `pg` client (a `pg.PoolClient` after `BEGIN`) that `enqueue` uses. */
export interface OutboxPgClient {
  query(config: { text: string; values?: unknown[]; rowMode: "array" }): Promise<{ rows: any[] }>;
}

/** The part of an `mssql.Request` that `enqueue` uses. */
export interface OutboxMssqlRequest {
  arrayRowMode: boolean;
  input(name: string, value: unknown): unknown;
  query(command: string): Promise<{ recordset?: unknown }>;
}

/** The part of an `mssql.Transaction` (after `begin()`) that `enqueue` uses. */
export interface OutboxMssqlTransaction {
  request(): OutboxMssqlRequest;
  begin(...args: any[]): unknown;
  commit(...args: any[]): unknown;
  rollback(...args: any[]): unknown;
}

/** The transaction that `enqueue` writes in: a `pg` client in a transaction, or an `mssql.Transaction`. */
export type OutboxTransaction = OutboxPgClient | OutboxMssqlTransaction;

/** One outbox row to write. */
export interface OutboxMessage {
  /** Routes the row (the `topicPattern` of the routes). Required, at most 255 characters. */
  topic: string;
  /** The unit of order. Optional, a string of at most 255 characters; `""`, `null` or absent writes NULL. */
  key?: string | null;
  /**
   * The message body, encoded with `JSON.stringify` exactly once. A `Uint8Array` (or `Buffer`)
   * is taken as JSON text and must be valid JSON. Refused: `undefined`, `null`, a value that
   * JSON cannot encode, and a string that itself holds a JSON object, array or string (a payload
   * that was already encoded: pass the value instead).
   */
  payload: unknown;
  /** Headers that travel with the message; HTTP field names, values without CR, LF or NUL. Absent writes `{}`. */
  headers?: Record<string, string> | null;
  /** The kind of business entity. Optional, a string of at most 255 characters; `""`, `null` or absent writes NULL. */
  aggregateType?: string | null;
  /** The retry ceiling of this row, an integer from 1 to 2147483647. Absent or 0 keeps the column default (5). */
  maxAttempts?: number;
  /**
   * Milliseconds before the first delivery, counted from the database's clock (PostgreSQL:
   * `CURRENT_TIMESTAMP`, the start of the transaction; SQL Server: `SYSUTCDATETIME()`). From 0
   * (at once, the default) to {@link MAX_DELAY_MS}; a fraction is dropped.
   */
  delayMs?: number;
}

/** The outbox table and the names of the columns that `enqueue` writes. */
export interface OutboxSchema {
  table: string;
  id: string;
  topic: string;
  key: string;
  aggregateType: string;
  payload: string;
  headers: string;
  maxAttempts: string;
  scheduledAt: string;
}

/** The names that the bundled migrations create. */
export const defaultOutboxSchema: Readonly<OutboxSchema> = Object.freeze({
  table: "outbox",
  id: "id",
  topic: "topic",
  key: "key",
  aggregateType: "aggregate_type",
  payload: "payload",
  headers: "headers",
  maxAttempts: "max_attempts",
  scheduledAt: "scheduled_at",
});

/** The options of `enqueue`. */
export interface EnqueueOptions {
  /** The database. Default: detected from the transaction (an `mssql.Transaction` is SQL Server, else PostgreSQL). */
  dialect?: "postgresql" | "sqlserver";
  /** Renamed names (database.outboxTableName, database.columnMapping.outbox); an absent one keeps its default. */
  schema?: Partial<OutboxSchema>;
}

/** The largest number of characters of topic, key and aggregate type (their columns are VARCHAR(255)). */
export const MAX_TEXT_LENGTH = 255;
/** The largest `maxAttempts`: the column is a 32-bit integer. */
export const MAX_ATTEMPTS_LIMIT = 2_147_483_647;
/** The longest `delayMs`, 365 days. A longer one is almost always a unit mistake. */
export const MAX_DELAY_MS = 365 * 24 * 60 * 60 * 1000;

/** The error of a message or an option that `enqueue` refuses before it sends anything. Its message names each problem. */
export class OutboxMessageError extends Error {
  /** Every problem found, one sentence each. */
  readonly problems: readonly string[];
  constructor(problems: string[]) {
    super(`queuebox-inbox: invalid outbox message: ${problems.join("; ")}`);
    this.name = "OutboxMessageError";
    this.problems = problems;
  }
}

const identifier = /^[A-Za-z_][A-Za-z0-9_]*$/;
const headerName = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** Checks and completes a schema; throws a TypeError that names every bad name. */
export function resolveOutboxSchema(schema: Partial<OutboxSchema> = {}): OutboxSchema {
  const out = { ...defaultOutboxSchema } as OutboxSchema;
  const bad: string[] = [];
  const seen = new Map<string, string>();
  for (const field of Object.keys(defaultOutboxSchema) as (keyof OutboxSchema)[]) {
    const value = schema[field];
    if (value !== undefined && value !== "") {
      out[field] = value;
    }
    const name = out[field];
    if (typeof name !== "string" || !identifier.test(name)) {
      bad.push(`schema.${field} ${JSON.stringify(name)} is not a SQL identifier (a letter or _, then letters, digits and _)`);
      continue;
    }
    if (field === "table") {
      continue;
    }
    const lower = name.toLowerCase(); // SQL Server compares names without regard to case
    const other = seen.get(lower);
    if (other !== undefined) {
      bad.push(`schema.${field} ${JSON.stringify(name)} is also the name of schema.${other}`);
      continue;
    }
    seen.set(lower, field);
  }
  if (bad.length > 0) {
    throw new TypeError(`queuebox-inbox: checking the outbox schema: ${bad.join("; ")}`);
  }
  return out;
}

/**
 * The INSERT that `enqueue` sends. Its parameters are, in order: topic, key, aggregate type,
 * payload, headers, then max attempts when `withMaxAttempts`, then the delay when `withDelay`
 * (milliseconds on PostgreSQL; seconds and the remaining milliseconds on SQL Server). It
 * returns the new row's id as text, in its one column.
 */
export function outboxStatement(
  dialect: "postgresql" | "sqlserver",
  schema: Partial<OutboxSchema> = {},
  withMaxAttempts = false,
  withDelay = false,
): string {
  const s = resolveOutboxSchema(schema);
  const mssql = dialect === "sqlserver";
  const q = (name: string) => (mssql ? `[${name.replace(/]/g, "]]")}]` : `"${name.replace(/"/g, '""')}"`);
  let n = 0;
  const param = () => (mssql ? `@p${++n}` : `$${++n}`);
  const columns = [q(s.topic), q(s.key), q(s.aggregateType), q(s.payload), q(s.headers)];
  const values = [param(), param(), param(), param(), param()];
  if (withMaxAttempts) {
    columns.push(q(s.maxAttempts));
    values.push(param());
  }
  if (withDelay) {
    columns.push(q(s.scheduledAt));
    if (mssql) {
      const seconds = param();
      const millis = param();
      values.push(`DATEADD(MILLISECOND, CAST(${millis} AS INT), DATEADD(SECOND, CAST(${seconds} AS INT), SYSUTCDATETIME()))`);
    } else {
      values.push(`CURRENT_TIMESTAMP + CAST(${param()} AS BIGINT) * INTERVAL '1 millisecond'`);
    }
  }
  if (mssql) {
    return `INSERT INTO ${q(s.table)} (${columns.join(", ")}) OUTPUT CAST(INSERTED.${q(s.id)} AS NVARCHAR(64)) VALUES (${values.join(", ")})`;
  }
  return `INSERT INTO ${q(s.table)} (${columns.join(", ")}) VALUES (${values.join(", ")}) RETURNING CAST(${q(s.id)} AS TEXT)`;
}

/** Returns the JSON text that `enqueue` writes for `payload`, or throws an {@link OutboxMessageError}. */
export function encodePayload(payload: unknown): string {
  const problem = payloadProblem(payload);
  if (typeof problem !== "object") {
    throw new OutboxMessageError([problem]);
  }
  return problem.json;
}

function payloadProblem(payload: unknown): string | { json: string } {
  let json: string | undefined;
  if (payload === undefined || payload === null) {
    return "payload is required (null and undefined are not a message body)";
  }
  if (payload instanceof Uint8Array) {
    json = new TextDecoder("utf-8", { fatal: false }).decode(payload).trim();
    try {
      JSON.parse(json);
    } catch {
      return "payload is not valid JSON (a Uint8Array or Buffer must hold JSON text)";
    }
  } else {
    try {
      json = JSON.stringify(payload);
    } catch (error) {
      return `payload cannot be encoded as JSON: ${(error as Error).message}`;
    }
    if (json === undefined) {
      return `payload of type ${typeof payload} cannot be encoded as JSON`;
    }
  }
  if (json === "null") {
    return "payload is JSON null; the column needs a JSON value";
  }
  if (json.startsWith('"')) {
    const inner = (JSON.parse(json) as string).trim();
    if (/^[{["]/.test(inner)) {
      try {
        JSON.parse(inner);
        return "payload is a string that holds JSON (encoded twice): pass the value itself, not JSON.stringify(value)";
      } catch {
        // a plain string that starts with a bracket
      }
    }
  }
  return { json };
}

/** Returns the JSON object that `enqueue` writes for `headers` (`{}` for none), or throws an {@link OutboxMessageError}. */
export function encodeHeaders(headers: Record<string, string> | null | undefined): string {
  const problems = headerProblems(headers);
  if (problems.length > 0) {
    throw new OutboxMessageError(problems);
  }
  return JSON.stringify(sortedHeaders(headers ?? {}));
}

function headerProblems(headers: unknown): string[] {
  if (headers === undefined || headers === null) {
    return [];
  }
  if (typeof headers !== "object" || Array.isArray(headers)) {
    return ["headers must be an object of strings"];
  }
  const problems: string[] = [];
  for (const [name, value] of Object.entries(headers).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (!headerName.test(name)) {
      problems.push(`headers name ${JSON.stringify(name)} is not an HTTP field name`);
    }
    if (typeof value !== "string") {
      problems.push(`headers ${JSON.stringify(name)} has a value that is not a string (${typeof value})`);
    } else if (/[\r\n\0]/.test(value)) {
      problems.push(`headers ${JSON.stringify(name)} has a value with CR, LF or NUL`);
    }
  }
  return problems;
}

function sortedHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of Object.keys(headers).sort()) {
    out[name] = headers[name]!;
  }
  return out;
}

function textProblem(field: string, value: unknown, required: boolean): string | undefined {
  if (value === undefined || value === null || value === "") {
    return required ? `${field} is required` : undefined;
  }
  if (typeof value !== "string") {
    return `${field} must be a string, not ${typeof value} (${String(value)}); convert it with String() if that is meant`;
  }
  const length = [...value].length;
  if (length > MAX_TEXT_LENGTH) {
    return `${field} has ${length} characters, more than ${MAX_TEXT_LENGTH}`;
  }
  if (value.includes("\0")) {
    return `${field} holds a NUL character`;
  }
  return undefined;
}

function isMssqlTransaction(tx: unknown): tx is OutboxMssqlTransaction {
  return typeof tx === "object" && tx !== null && typeof (tx as OutboxMssqlTransaction).request === "function" &&
    typeof (tx as OutboxMssqlTransaction).begin === "function";
}

function isPgClient(tx: unknown): tx is OutboxPgClient {
  return typeof tx === "object" && tx !== null && typeof (tx as OutboxPgClient).query === "function";
}

/**
 * Writes `message` as an outbox row through `tx` and returns the new row's id as text.
 *
 * `tx` is the open transaction of the business write: a `pg` client (a `pg.PoolClient` or
 * `pg.Client`) after `BEGIN`, or an `mssql.Transaction` after `begin()`. A `pg.Pool` is refused:
 * each of its queries runs on a connection of its own, outside the transaction. `enqueue`
 * neither commits nor rolls back. A message that breaks a rule of {@link OutboxMessage} fails
 * with an {@link OutboxMessageError} before anything is sent.
 *
 * @example
 * const client = await pool.connect();
 * try {
 *   await client.query("BEGIN");
 *   await client.query("INSERT INTO orders (id, total) VALUES ($1, $2)", [order.id, order.total]);
 *   await enqueue(client, { topic: "order.created", key: order.customerId, payload: order });
 *   await client.query("COMMIT");
 * } catch (error) {
 *   await client.query("ROLLBACK");
 *   throw error;
 * } finally {
 *   client.release();
 * }
 */
export async function enqueue(tx: OutboxTransaction, message: OutboxMessage, options: EnqueueOptions = {}): Promise<string> {
  const mssql = isMssqlTransaction(tx);
  if (!mssql && !isPgClient(tx)) {
    throw new TypeError("queuebox-inbox: enqueue needs a pg client in a transaction or an mssql.Transaction");
  }
  if (!mssql && typeof (tx as { totalCount?: unknown }).totalCount === "number") {
    throw new TypeError(
      "queuebox-inbox: enqueue got a pg.Pool; pass the client of your transaction (await pool.connect(), then BEGIN), " +
        "or the message would not share the business write's transaction",
    );
  }
  const dialect = options.dialect ?? (mssql ? "sqlserver" : "postgresql");
  if (dialect !== "postgresql" && dialect !== "sqlserver") {
    throw new TypeError(`queuebox-inbox: enqueue dialect ${JSON.stringify(dialect)} is neither "postgresql" nor "sqlserver"`);
  }
  if ((dialect === "sqlserver") !== mssql) {
    throw new TypeError(`queuebox-inbox: enqueue dialect "${dialect}" does not match the transaction (${mssql ? "an mssql.Transaction" : "a pg client"})`);
  }
  if (typeof message !== "object" || message === null) {
    throw new OutboxMessageError(["the message must be an object"]);
  }

  const problems: string[] = [];
  for (const [field, value, required] of [
    ["topic", message.topic, true],
    ["key", message.key, false],
    ["aggregateType", message.aggregateType, false],
  ] as const) {
    const problem = textProblem(field, value, required);
    if (problem) {
      problems.push(problem);
    }
  }
  const payload = payloadProblem(message.payload);
  if (typeof payload !== "object") {
    problems.push(payload);
  }
  problems.push(...headerProblems(message.headers));
  const maxAttempts = message.maxAttempts ?? 0;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 0 || maxAttempts > MAX_ATTEMPTS_LIMIT) {
    problems.push(`maxAttempts ${String(maxAttempts)} is not an integer from 1 to ${MAX_ATTEMPTS_LIMIT} (0 or absent keeps the column default, 5)`);
  }
  const delayMs = message.delayMs ?? 0;
  if (typeof delayMs !== "number" || !Number.isFinite(delayMs) || delayMs < 0 || delayMs > MAX_DELAY_MS) {
    problems.push(`delayMs ${String(delayMs)} is outside 0 to ${MAX_DELAY_MS} (365 days)`);
  }
  if (problems.length > 0) {
    throw new OutboxMessageError(problems);
  }

  const wholeDelay = Math.floor(delayMs);
  const values: unknown[] = [
    message.topic,
    message.key === "" || message.key == null ? null : message.key,
    message.aggregateType === "" || message.aggregateType == null ? null : message.aggregateType,
    (payload as { json: string }).json,
    JSON.stringify(sortedHeaders(message.headers ?? {})),
  ];
  if (maxAttempts > 0) {
    values.push(maxAttempts);
  }
  if (wholeDelay > 0) {
    if (dialect === "sqlserver") {
      values.push(Math.floor(wholeDelay / 1000), wholeDelay % 1000);
    } else {
      values.push(wholeDelay);
    }
  }
  const text = outboxStatement(dialect, options.schema, maxAttempts > 0, wholeDelay > 0);
  const table = resolveOutboxSchema(options.schema).table;
  try {
    if (mssql) {
      const request = (tx as OutboxMssqlTransaction).request();
      request.arrayRowMode = true;
      values.forEach((value, i) => request.input(`p${i + 1}`, value));
      const result = await request.query(text);
      const rows = result.recordset as unknown[][] | undefined;
      return String(rows?.[0]?.[0]);
    }
    const result = await (tx as OutboxPgClient).query({ text, values, rowMode: "array" });
    return String(result.rows[0]?.[0]);
  } catch (error) {
    throw new Error(`queuebox-inbox: inserting the ${JSON.stringify(message.topic)} row into ${table}: ${(error as Error).message}`, { cause: error });
  }
}

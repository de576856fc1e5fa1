/**
 * The SQL of a pull worker: the five statements of the QueueBox pull contract
 * (`examples/pull/sql`), rendered for a dialect and a table and column mapping.
 *
 * @module
 */

import { contractFiles } from "./generated/contract.js";

/** The database dialects that the library speaks. */
export type InboxDialect = "postgresql" | "sqlserver";

/** The dialects, for validation. */
export const dialects: readonly InboxDialect[] = ["postgresql", "sqlserver"];

/**
 * The table and column names of the inbox, as `database.inboxTableName` and
 * `database.columnMapping.inbox` of the QueueBox configuration set them. Every name must be a
 * SQL identifier: a letter or `_`, then letters, digits and `_`.
 */
export interface InboxSchema {
  /** The inbox table. Default `inbox`. */
  readonly table: string;
  readonly id: string;
  readonly source: string;
  readonly idempotencyKey: string;
  readonly aggregateId: string;
  readonly eventType: string;
  readonly payload: string;
  readonly headers: string;
  readonly state: string;
  readonly consumption: string;
  readonly attempt: string;
  readonly lastError: string;
  readonly scheduledAt: string;
  readonly createdAt: string;
  readonly processedAt: string;
  readonly claimedAt: string;
  readonly claimToken: string;
  readonly leaseExpiresAt: string;
  readonly correlationId: string;
}

/**
 * The default table and column names, those of the bundled QueueBox migrations. Spread it to
 * map a name: `{ ...defaultSchema, table: "qb_inbox", idempotencyKey: "dedup_key" }`.
 */
export const defaultSchema: InboxSchema = Object.freeze({
  table: "inbox",
  id: "id",
  source: "source",
  idempotencyKey: "idempotency_key",
  aggregateId: "aggregate_id",
  eventType: "event_type",
  payload: "payload",
  headers: "headers",
  state: "state",
  consumption: "consumption",
  attempt: "attempt",
  lastError: "last_error",
  scheduledAt: "scheduled_at",
  createdAt: "created_at",
  processedAt: "processed_at",
  claimedAt: "claimed_at",
  claimToken: "claim_token",
  leaseExpiresAt: "lease_expires_at",
  correlationId: "correlation_id",
});

/** The names of the five statements. */
export type InboxStatementName = "claim" | "renew" | "complete" | "retry" | "dead";

/** The parameters that the statements bind. */
export type InboxParameterName = "source" | "batch" | "lease_ms" | "cand_limit" | "id" | "token" | "delay_ms" | "error";

/** One statement of the contract, ready for a driver. */
export interface InboxStatement {
  /** The statement: `claim`, `renew`, `complete`, `retry` or `dead`. */
  readonly name: InboxStatementName;
  /**
   * The contract file with the mapped names substituted and the `:name` placeholders kept. For
   * the default schema it is the file byte for byte.
   */
  readonly contract: string;
  /** The text to run: `$1`, `$2`, ... for PostgreSQL, `@name` for SQL Server. */
  readonly text: string;
  /**
   * The parameter names in order of first appearance. For PostgreSQL the value of
   * `parameters[i]` binds to `$(i + 1)`; for SQL Server each binds under its own name.
   */
  readonly parameters: readonly InboxParameterName[];
}

/** The five statements for one dialect and one schema. */
export type InboxStatements = { readonly [K in InboxStatementName]: InboxStatement };

/** The names that the claims give to computed columns; a mapped name must not take them. */
const reservedNames = ["qb_now", "qb_rank"];

const identifierPattern = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The longest identifier of each dialect, in characters (PostgreSQL cuts longer names silently). */
const maxIdentifierLength: Record<InboxDialect, number> = { postgresql: 63, sqlserver: 128 };

const statementNames: readonly InboxStatementName[] = ["claim", "renew", "complete", "retry", "dead"];

const parameterNames: ReadonlySet<string> = new Set<InboxParameterName>([
  "source", "batch", "lease_ms", "cand_limit", "id", "token", "delay_ms", "error",
]);

/**
 * Returns the five statements of the pull contract for a dialect and a schema: the files of
 * `examples/pull/sql/<dialect>` with every mapped table and column name substituted as a quoted
 * identifier (`"name"` on PostgreSQL, `[name]` on SQL Server) and the `:name` placeholders turned
 * into the parameter syntax of the driver. It throws a `TypeError` when a name of the schema is
 * missing or is not a SQL identifier, so that a mapping can never carry SQL.
 */
export function inboxSql(dialect: InboxDialect = "postgresql", schema: InboxSchema = defaultSchema): InboxStatements {
  if (!dialects.includes(dialect)) {
    throw new TypeError(`queuebox-inbox: dialect ${JSON.stringify(dialect)} is not "postgresql" or "sqlserver"`);
  }
  const mapping = checkSchema(schema, dialect);
  const quote = dialect === "postgresql" ? quotePostgres : quoteSqlServer;
  const out = {} as Record<InboxStatementName, InboxStatement>;
  for (const name of statementNames) {
    const file = contractFiles[dialect][name];
    const contract = mapping.size === 0 ? file : renderNames(file, mapping, quote);
    const { text, parameters } = bindPlaceholders(contract, dialect);
    out[name] = Object.freeze({ name, contract, text, parameters: Object.freeze(parameters) });
  }
  return Object.freeze(out);
}

/**
 * Checks every name of the schema and returns the default names that it maps to another name.
 */
export function checkSchema(schema: InboxSchema, dialect: InboxDialect): Map<string, string> {
  if (typeof schema !== "object" || schema === null) {
    throw new TypeError("queuebox-inbox: schema must be an object of table and column names");
  }
  const problems: string[] = [];
  const mapping = new Map<string, string>();
  const columns = new Map<string, string>();
  for (const key of Object.keys(defaultSchema) as (keyof InboxSchema)[]) {
    const value: unknown = schema[key];
    const label = key === "table" ? "schema.table" : `schema.${key}`;
    if (typeof value !== "string") {
      problems.push(`${label} is missing`);
      continue;
    }
    if (!identifierPattern.test(value)) {
      problems.push(`${label} ${JSON.stringify(value)} is not a SQL identifier (a letter or _, then letters, digits and _)`);
      continue;
    }
    if (value.length > maxIdentifierLength[dialect]) {
      problems.push(`${label} ${JSON.stringify(value)} is longer than ${maxIdentifierLength[dialect]} characters`);
      continue;
    }
    if (reservedNames.includes(value.toLowerCase())) {
      problems.push(`${label} ${JSON.stringify(value)} is a name that the claim uses for a computed column`);
      continue;
    }
    if (key !== "table") {
      const other = columns.get(value.toLowerCase());
      if (other !== undefined) {
        problems.push(`schema.${key} ${JSON.stringify(value)} names the same column as schema.${other}`);
        continue;
      }
      columns.set(value.toLowerCase(), key);
    }
    if (value !== defaultSchema[key]) {
      mapping.set(defaultSchema[key], value);
    }
  }
  for (const key of Object.keys(schema)) {
    if (!(key in defaultSchema)) {
      problems.push(`schema.${key} is not a name of the inbox`);
    }
  }
  if (problems.length > 0) {
    throw new TypeError(`queuebox-inbox: ${problems.join("; ")}`);
  }
  return mapping;
}

/** Quotes a PostgreSQL identifier: `"name"`, a `"` inside doubled. */
function quotePostgres(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** Quotes a SQL Server identifier: `[name]`, a `]` inside doubled. */
function quoteSqlServer(name: string): string {
  return `[${name.replaceAll("]", "]]")}]`;
}

/**
 * Replaces every default name that stands as a whole word outside string literals, quoted
 * identifiers, comments, `:name` placeholders and `@name` variables with its mapped name,
 * quoted. This is rule 2 of the mapped-names section of `examples/pull/README.md`.
 */
function renderNames(src: string, mapping: ReadonlyMap<string, string>, quote: (name: string) => string): string {
  let out = "";
  scan(src, {
    text(part) {
      out += part;
    },
    word(word) {
      const mapped = mapping.get(word);
      out += mapped === undefined ? word : quote(mapped);
    },
    placeholder(_name, raw) {
      out += raw;
    },
  });
  return out;
}

/** Turns the `:name` placeholders into `$n` (PostgreSQL) or `@name` (SQL Server). */
function bindPlaceholders(src: string, dialect: InboxDialect): { text: string; parameters: InboxParameterName[] } {
  const parameters: InboxParameterName[] = [];
  let text = "";
  scan(src, {
    text(part) {
      text += part;
    },
    word(word) {
      text += word;
    },
    placeholder(name) {
      if (!parameterNames.has(name)) {
        throw new Error(`queuebox-inbox: the contract holds the unknown parameter :${name}`);
      }
      let index = parameters.indexOf(name as InboxParameterName);
      if (index < 0) {
        parameters.push(name as InboxParameterName);
        index = parameters.length - 1;
      }
      text += dialect === "postgresql" ? `$${index + 1}` : `@${name}`;
    },
  });
  return { text, parameters };
}

interface ScanSink {
  /** Text that passes unchanged: comments, literals, quoted identifiers, punctuation, variables. */
  text(part: string): void;
  /** A bare word: a keyword, an alias or a table or column name. */
  word(word: string): void;
  /** A `:name` placeholder. */
  placeholder(name: string, raw: string): void;
}

/**
 * Splits SQL text into the parts that {@link ScanSink} names. It knows `--` and nested `/* *\/`
 * comments, `'...'` literals (with `''` and, after `E`, backslash escapes), `"..."` and
 * `[...]` quoted identifiers, `$tag$` bodies, `::` casts, `@name` variables and `:name`
 * placeholders.
 */
function scan(src: string, sink: ScanSink): void {
  const n = src.length;
  let i = 0;
  while (i < n) {
    const c = src[i]!;
    const next = i + 1 < n ? src[i + 1]! : "";
    if (c === "-" && next === "-") {
      const end = src.indexOf("\n", i);
      const stop = end < 0 ? n : end;
      sink.text(src.slice(i, stop));
      i = stop;
    } else if (c === "/" && next === "*") {
      const stop = blockCommentEnd(src, i);
      sink.text(src.slice(i, stop));
      i = stop;
    } else if (c === "'") {
      const escapes = i > 0 && (src[i - 1] === "E" || src[i - 1] === "e") && (i < 2 || !isIdentChar(src[i - 2]!));
      const stop = quotedEnd(src, i, "'", escapes);
      sink.text(src.slice(i, stop));
      i = stop;
    } else if (c === '"') {
      const stop = quotedEnd(src, i, '"', false);
      sink.text(src.slice(i, stop));
      i = stop;
    } else if (c === "[") {
      const stop = quotedEnd(src, i, "]", false);
      sink.text(src.slice(i, stop));
      i = stop;
    } else if (c === "$" && (i === 0 || !isIdentChar(src[i - 1]!)) && dollarTag(src, i) !== undefined) {
      const tag = dollarTag(src, i)!;
      const close = src.indexOf(tag, i + tag.length);
      const stop = close < 0 ? n : close + tag.length;
      sink.text(src.slice(i, stop));
      i = stop;
    } else if (c === ":" && next === ":") {
      sink.text("::");
      i += 2;
    } else if ((c === ":" || c === "@") && isIdentStart(next)) {
      let j = i + 1;
      while (j < n && isIdentChar(src[j]!)) {
        j++;
      }
      if (c === ":") {
        sink.placeholder(src.slice(i + 1, j), src.slice(i, j));
      } else {
        sink.text(src.slice(i, j));
      }
      i = j;
    } else if (c === "@" && next === "@") {
      // A system function such as @@TRANCOUNT.
      let j = i + 2;
      while (j < n && isIdentChar(src[j]!)) {
        j++;
      }
      sink.text(src.slice(i, j));
      i = j;
    } else if (isIdentStart(c)) {
      let j = i + 1;
      while (j < n && isIdentChar(src[j]!)) {
        j++;
      }
      sink.word(src.slice(i, j));
      i = j;
    } else if (isDigit(c)) {
      // A number, with any letters glued to it (1e5), is never a name.
      let j = i + 1;
      while (j < n && isIdentChar(src[j]!)) {
        j++;
      }
      sink.text(src.slice(i, j));
      i = j;
    } else {
      sink.text(c);
      i++;
    }
  }
}

function blockCommentEnd(src: string, start: number): number {
  let depth = 0;
  let i = start;
  while (i < src.length) {
    if (src.startsWith("/*", i)) {
      depth++;
      i += 2;
    } else if (src.startsWith("*/", i)) {
      depth--;
      i += 2;
      if (depth === 0) {
        return i;
      }
    } else {
      i++;
    }
  }
  return src.length;
}

/** The index just past the literal that opens at `src[start]` and closes with `close`. */
function quotedEnd(src: string, start: number, close: string, escapes: boolean): number {
  for (let j = start + 1; j < src.length; j++) {
    const c = src[j];
    if (escapes && c === "\\") {
      j++;
    } else if (c === close) {
      if (src[j + 1] === close) {
        j++;
      } else {
        return j + 1;
      }
    }
  }
  return src.length;
}

/** The `$tag$` that opens at `src[start]`, or undefined. */
function dollarTag(src: string, start: number): string | undefined {
  let j = start + 1;
  while (j < src.length && isIdentChar(src[j]!) && !(j === start + 1 && isDigit(src[j]!))) {
    j++;
  }
  return src[j] === "$" ? src.slice(start, j + 1) : undefined;
}

function isIdentStart(c: string): boolean {
  return c === "_" || (c >= "a" && c <= "z") || (c >= "A" && c <= "Z");
}

function isDigit(c: string): boolean {
  return c >= "0" && c <= "9";
}

function isIdentChar(c: string): boolean {
  return isIdentStart(c) || isDigit(c);
}

/**
 * The settings of a worker and their defaults.
 *
 * @module
 */

import { defaultRetryPolicy, type InboxRetryPolicy } from "./policy.js";
import { checkSchema, defaultSchema, dialects, type InboxDialect, type InboxSchema } from "./sql.js";

/**
 * Where the library writes its log lines. Every message and every field passes through the
 * QueueBox redaction first. Field names are snake_case: `source`, `message_id`, `attempt`,
 * `delay_ms`, `error`, .... `console` fits this interface.
 */
export interface InboxLogger {
  info(message: string, fields?: Readonly<Record<string, unknown>>): void;
  warn(message: string, fields?: Readonly<Record<string, unknown>>): void;
  error(message: string, fields?: Readonly<Record<string, unknown>>): void;
}

/**
 * The part of an OpenTelemetry `TracerProvider` that the worker calls: the provider of
 * `@opentelemetry/api` and those of its SDKs fit. It is declared here, not imported, so that the
 * package's types compile without `@opentelemetry/api`, which is an optional peer dependency.
 */
export interface InboxTracerProvider {
  getTracer(name: string, version?: string, options?: { schemaUrl?: string }): unknown;
}

/** The settings of an {@link InboxWorker}. Only `source` is required. */
export interface InboxOptions {
  /** The source whose rows this worker takes: a key of `sources` with `consumption: pull`. */
  readonly source: string;
  /** The largest number of rows in one claim. Default 10. */
  readonly batchSize?: number;
  /** The lease duration in milliseconds. Default 30000. The lease is renewed every third of it. */
  readonly leaseMs?: number;
  /** The largest number of handlers at one time. Default 1. */
  readonly maxConcurrency?: number;
  /** The wait after a claim that returned nothing, in milliseconds. Default 1000. */
  readonly pollIntervalMs?: number;
  /** How long a stop waits for running handlers before it aborts them, in milliseconds. Default 30000. */
  readonly shutdownGraceMs?: number;
  /** `"postgresql"` (the default) or `"sqlserver"`. */
  readonly dialect?: InboxDialect;
  /** The table and column names. Default {@link defaultSchema}. */
  readonly schema?: InboxSchema;
  /** What happens to a row whose handler failed. Default {@link defaultRetryPolicy}(). */
  readonly retryPolicy?: InboxRetryPolicy;
  /** Where log lines go. Without a logger, the library prints nothing. */
  readonly logger?: InboxLogger;
  /**
   * Makes the span of each handler run, the child of the W3C trace context (`traceparent`,
   * `tracestate`) in the row's headers. Default: the global provider of `@opentelemetry/api`
   * when the application has that package (an optional peer dependency); without an SDK it
   * records nothing. See the README's "Tracing".
   */
  readonly tracerProvider?: InboxTracerProvider;
}

/** The settings with every default filled in. */
export interface ResolvedInboxOptions {
  readonly source: string;
  readonly batchSize: number;
  readonly leaseMs: number;
  readonly maxConcurrency: number;
  readonly pollIntervalMs: number;
  readonly shutdownGraceMs: number;
  readonly dialect: InboxDialect;
  readonly schema: InboxSchema;
  readonly retryPolicy: InboxRetryPolicy;
  readonly logger: InboxLogger | undefined;
  readonly tracerProvider: InboxTracerProvider | undefined;
}

/** The largest number of milliseconds that a timer or an INT parameter takes. */
const MAX_MS = 2 ** 31 - 1;

/** The largest batch: the claim reads at most 500 candidates per branch, so more cannot help. */
const MAX_BATCH = 500;

const knownOptions: ReadonlySet<string> = new Set([
  "source", "batchSize", "leaseMs", "maxConcurrency", "pollIntervalMs", "shutdownGraceMs",
  "dialect", "schema", "retryPolicy", "logger", "tracerProvider",
]);

/**
 * Returns the options with their defaults filled in: `batchSize` 10, `leaseMs` 30000,
 * `maxConcurrency` 1, `pollIntervalMs` 1000, `shutdownGraceMs` 30000, `dialect`
 * `"postgresql"`, `schema` {@link defaultSchema}, `retryPolicy` {@link defaultRetryPolicy}()
 * and no logger. It throws a `TypeError` or a `RangeError` that names every setting that cannot
 * work: a missing source, a count that is not a positive integer, a name that is not a SQL
 * identifier, an option that does not exist.
 */
export function resolveOptions(options: InboxOptions): ResolvedInboxOptions {
  if (typeof options !== "object" || options === null) {
    throw new TypeError("queuebox-inbox: options must be an object with at least a source");
  }
  const problems: string[] = [];
  for (const key of Object.keys(options)) {
    if (!knownOptions.has(key)) {
      problems.push(`${key} is not an option`);
    }
  }
  const { source } = options;
  if (typeof source !== "string" || source.length === 0) {
    problems.push("source must be a non-empty string");
  }
  const integer = (name: keyof InboxOptions, fallback: number, min: number, max: number): number => {
    const value: unknown = options[name];
    if (value === undefined) {
      return fallback;
    }
    if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
      problems.push(`${name} must be an integer from ${min} to ${max}, not ${String(value)}`);
      return fallback;
    }
    return value;
  };
  const batchSize = integer("batchSize", 10, 1, MAX_BATCH);
  const leaseMs = integer("leaseMs", 30_000, 3, MAX_MS);
  const maxConcurrency = integer("maxConcurrency", 1, 1, 10_000);
  const pollIntervalMs = integer("pollIntervalMs", 1000, 0, MAX_MS);
  const shutdownGraceMs = integer("shutdownGraceMs", 30_000, 0, MAX_MS);

  const dialect = options.dialect ?? "postgresql";
  if (!dialects.includes(dialect)) {
    problems.push(`dialect must be "postgresql" or "sqlserver", not ${JSON.stringify(dialect)}`);
  }
  const schema = options.schema ?? defaultSchema;
  if (dialects.includes(dialect)) {
    try {
      checkSchema(schema, dialect);
    } catch (error) {
      problems.push((error as Error).message.replace(/^queuebox-inbox: /, ""));
    }
  }
  const retryPolicy = options.retryPolicy ?? defaultRetryPolicy();
  if (typeof retryPolicy !== "function") {
    problems.push("retryPolicy must be a function (message, failure) => retryAfter(ms) or deadLetter()");
  }
  const { logger } = options;
  if (logger !== undefined && !(typeof logger === "object" && logger !== null &&
    typeof logger.info === "function" && typeof logger.warn === "function" && typeof logger.error === "function")) {
    problems.push("logger must have info, warn and error methods");
  }
  const { tracerProvider } = options;
  if (tracerProvider !== undefined && !(typeof tracerProvider === "object" && tracerProvider !== null &&
    typeof tracerProvider.getTracer === "function")) {
    problems.push("tracerProvider must have a getTracer method");
  }
  if (problems.length > 0) {
    throw new (problems.some((p) => p.includes(" must be an integer")) ? RangeError : TypeError)(
      `queuebox-inbox: ${problems.join("; ")}`,
    );
  }
  return Object.freeze({
    source: source as string,
    batchSize,
    leaseMs,
    maxConcurrency,
    pollIntervalMs,
    shutdownGraceMs,
    dialect,
    schema: Object.freeze({ ...schema }),
    retryPolicy,
    logger,
    tracerProvider,
  });
}

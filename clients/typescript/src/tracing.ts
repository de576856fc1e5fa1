// Tracing of the handler runs, through the OpenTelemetry API when the application has it.
//
// The package does not depend on @opentelemetry/api: it is an optional peer dependency, loaded
// once with a dynamic import. Without it, or with it but without an SDK (the API's default
// no-op tracer), a handler run creates no span and pays next to nothing.
import type * as OtelApi from "@opentelemetry/api";

import type { InboxMessage } from "./message.js";
import type { InboxTracerProvider } from "./options.js";
import { sanitizeError } from "./redact.js";

/** The instrumentation scope of the worker's spans. */
export const TRACER_NAME = "@alternayte/queuebox-inbox";

/** The results of a handler span, in its `queuebox.result` attribute. */
export type HandlerResult = "completed" | "failed" | "cancelled" | "lease_lost" | "error";

let api: Promise<typeof OtelApi | undefined> | undefined;

/** Loads @opentelemetry/api once; undefined when the application does not have it. */
export function loadOtelApi(): Promise<typeof OtelApi | undefined> {
  api ??= import("@opentelemetry/api").then(
    (m: unknown) => {
      // An ES module namespace has the names; a CommonJS one may hold them under default.
      const ns = m as { trace?: unknown; default?: unknown };
      return (ns.trace !== undefined ? ns : ns.default) as typeof OtelApi | undefined;
    },
    () => undefined,
  );
  return api;
}

const traceparentRe = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** Reads a header in any letter case: a webhook's Traceparent is stored as it arrived. */
function header(headers: Readonly<Record<string, string>>, name: string): string | undefined {
  if (headers[name] !== undefined) return headers[name];
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() === name) return v;
  }
  return undefined;
}

/**
 * The remote span context of the W3C `traceparent` (and `tracestate`) in a row's headers, or
 * undefined when there is none or it is not valid (version ff, an all-zero id).
 */
export function parentOf(otel: typeof OtelApi, headers: Readonly<Record<string, string>>): OtelApi.SpanContext | undefined {
  const m = traceparentRe.exec((header(headers, "traceparent") ?? "").trim().toLowerCase());
  if (m === null || m[1] === "ff" || /^0+$/.test(m[2]!) || /^0+$/.test(m[3]!)) return undefined;
  const state = header(headers, "tracestate");
  return {
    traceId: m[2]!,
    spanId: m[3]!,
    traceFlags: parseInt(m[4]!, 16) & 1,
    isRemote: true,
    ...(state ? { traceState: otel.createTraceState(state) } : {}),
  };
}

/** A started handler span: `run` runs work with the span active; `end` records the result. */
export interface HandlerSpan {
  run<T>(work: () => T): T;
  end(result: HandlerResult, error?: unknown): void;
}

const noSpan: HandlerSpan = { run: (work) => work(), end: () => undefined };

/**
 * Starts the span of a handler run, the child of the row's trace context. `provider` is the
 * option `tracerProvider`; without it the API's global provider is used.
 */
export function startHandlerSpan(
  otel: typeof OtelApi | undefined,
  provider: InboxTracerProvider | undefined,
  message: InboxMessage,
): HandlerSpan {
  if (otel === undefined) return noSpan;
  // The option's type is structural (the package's types do not import the API); the provider
  // itself is one of the API's, which resolveOptions has checked for a getTracer method.
  const tracer = ((provider as OtelApi.TracerProvider | undefined) ?? otel.trace.getTracerProvider()).getTracer(TRACER_NAME);
  const remote = parentOf(otel, message.headers);
  const parent = remote ? otel.trace.setSpanContext(otel.ROOT_CONTEXT, remote) : otel.ROOT_CONTEXT;
  const attributes: OtelApi.Attributes = {
    "messaging.system": "queuebox",
    "messaging.operation.type": "process",
    "messaging.destination.name": message.source,
    "messaging.message.id": message.id,
    "queuebox.source": message.source,
    "queuebox.inbox.id": message.id,
    "queuebox.attempt": message.attempt,
  };
  if (message.eventType) attributes["queuebox.event_type"] = message.eventType;
  if (message.aggregateId) attributes["queuebox.aggregate_id"] = message.aggregateId;
  const span = tracer.startSpan(`queuebox inbox handle ${message.source}`, { kind: otel.SpanKind.CONSUMER, attributes }, parent);
  const active = otel.trace.setSpan(parent, span);
  return {
    run: (work) => otel.context.with(active, work),
    end: (result, error) => {
      span.setAttribute("queuebox.result", result);
      if (error !== undefined) {
        // The error's text as last_error stores it: secrets redacted.
        span.recordException({ name: error instanceof Error ? error.name : "Error", message: sanitizeError(error) });
        span.setStatus({ code: otel.SpanStatusCode.ERROR, message: result });
      }
      span.end();
    },
  };
}

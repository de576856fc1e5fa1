// The handler span against the real PostgreSQL, with the OpenTelemetry SDK's in-memory exporter.
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it } from "node:test";

import { context, trace, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";

import { defaultRetryPolicy } from "../src/index.js";
import { insertRows, newDatabase, readRows, startWorker, waitFor, within, type TestDatabase } from "./support.js";

const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
const parentSpanId = "00f067aa0ba902b7";

let db: TestDatabase;
const contextManager = new AsyncLocalStorageContextManager();

beforeEach(async (t) => {
  db = await newDatabase(t.name);
  context.setGlobalContextManager(contextManager.enable());
});

afterEach(async () => {
  context.disable();
  await db.drop();
});

describe("handler spans", () => {
  it("continue the row's trace, are active in the handler and mark a failure", async () => {
    await insertRows(db.pool, [
      { key: "traced", eventType: "order.paid", headers: { Traceparent: `00-${traceId}-${parentSpanId}-01`, tracestate: "vendor=1" } },
      { key: "fails", headers: { traceparent: `00-${traceId}-${parentSpanId}-01` } },
      { key: "plain" },
      { key: "bad", headers: { traceparent: `00-${"0".repeat(32)}-${parentSpanId}-01` } },
    ]);
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const active = new Map<string, string | undefined>();
    const w = startWorker(db.pool, {
      source: "orders", pollIntervalMs: 20, tracerProvider: provider,
      // The failed row waits an hour, so that each row runs once.
      retryPolicy: defaultRetryPolicy({ maxAttempts: 5, baseDelayMs: 3_600_000, maxDelayMs: 3_600_000, jitter: 0 }),
    }, async (message) => {
      active.set(message.idempotencyKey, trace.getActiveSpan()?.spanContext().spanId);
      if (message.idempotencyKey === "fails") {
        throw new Error("boom password=hunter2");
      }
    });
    await waitFor("four handler spans", () => exporter.getFinishedSpans().length === 4, 30_000);
    w.stop();
    await within("the stop", w.done, 10_000);

    const rows = await readRows(db.pool);
    const ids = new Map<string, string>(
      (await db.pool.query("SELECT CAST(id AS TEXT) AS id, idempotency_key FROM inbox")).rows.map((r) => [r.id, r.idempotency_key]),
    );
    const spans = exporter.getFinishedSpans();
    const byKey = new Map<string, (typeof spans)[number]>();
    for (const s of spans) {
      byKey.set(ids.get(String(s.attributes["messaging.message.id"]))!, s);
    }
    assert.equal(byKey.size, 4, "a span for each row");
    for (const key of ["traced", "fails"]) {
      const s = byKey.get(key)!;
      assert.equal(s.spanContext().traceId, traceId, `${key}: the row's trace`);
      assert.equal(s.parentSpanContext?.spanId, parentSpanId, `${key}: the stored span is the parent`);
      assert.equal(s.kind, SpanKind.CONSUMER);
      assert.equal(s.name, "queuebox inbox handle orders");
      assert.equal(s.attributes["queuebox.source"], "orders");
      assert.equal(s.attributes["queuebox.attempt"], 0);
      assert.equal(active.get(key), s.spanContext().spanId, `${key}: the span is active in the handler`);
    }
    const traced = byKey.get("traced")!;
    assert.equal(traced.attributes["queuebox.result"], "completed");
    assert.equal(traced.attributes["queuebox.event_type"], "order.paid");
    assert.equal(traced.spanContext().traceState?.get("vendor"), "1");
    assert.notEqual(traced.status.code, SpanStatusCode.ERROR);

    const failed = byKey.get("fails")!;
    assert.equal(failed.attributes["queuebox.result"], "failed");
    assert.equal(failed.status.code, SpanStatusCode.ERROR);
    const exception = JSON.stringify(failed.events);
    assert.match(exception, /boom/);
    assert.doesNotMatch(exception, /hunter2/, "the span holds the error as last_error does: secrets redacted");

    for (const key of ["plain", "bad"]) {
      const s = byKey.get(key)!;
      assert.equal(s.parentSpanContext, undefined, `${key}: a root span`);
      assert.notEqual(s.spanContext().traceId, traceId);
    }
    assert.equal(rows.get("traced")!.state, "processed");
  });
});

/**
 * The message of a claimed row: the columns of the claim, read by position, as the handler
 * receives them.
 *
 * @module
 */

import type { InboxMessage } from "./message.js";

/**
 * Builds the message from a claimed row, read by position: id, source, idempotency_key,
 * aggregate_id, event_type, payload, headers, attempt, correlation_id, claim_token. The claim
 * token stays out of it.
 */
export function decodeMessage(row: readonly unknown[], dialect: string): InboxMessage {
  const [id, source, idempotencyKey, aggregateId, eventType, payload, headers, attempt, correlationId] = row;
  const json = (value: unknown): unknown => (dialect === "sqlserver" && typeof value === "string" ? JSON.parse(value) : value);
  return Object.freeze({
    id: String(id),
    source: String(source),
    idempotencyKey: String(idempotencyKey),
    aggregateId: nullableString(aggregateId),
    eventType: nullableString(eventType),
    payload: json(payload),
    headers: decodeHeaders(typeof headers === "string" ? JSON.parse(headers) : headers),
    attempt: Number(attempt),
    correlationId: nullableString(correlationId),
  });
}

/** A message for a row that does not decode, for the retry policy: the payload is its raw value. */
export function fallbackMessage(row: readonly unknown[]): InboxMessage {
  const [id, source, idempotencyKey, aggregateId, eventType, payload, , attempt, correlationId] = row;
  return Object.freeze({
    id: String(id),
    source: String(source),
    idempotencyKey: String(idempotencyKey),
    aggregateId: nullableString(aggregateId),
    eventType: nullableString(eventType),
    payload,
    headers: Object.freeze({}),
    attempt: Number(attempt),
    correlationId: nullableString(correlationId),
  });
}

function nullableString(value: unknown): string | null {
  return value === null || value === undefined ? null : String(value);
}

/** The stored headers as one string value per name. */
function decodeHeaders(value: unknown): Readonly<Record<string, string>> {
  const out: Record<string, string> = {};
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    for (const [name, v] of Object.entries(value)) {
      if (typeof v === "string") {
        out[name] = v;
      } else if (Array.isArray(v)) {
        out[name] = v.map(String).join(", ");
      } else if (v !== null && v !== undefined) {
        out[name] = typeof v === "object" ? JSON.stringify(v) : String(v);
      }
    }
  }
  return Object.freeze(out);
}

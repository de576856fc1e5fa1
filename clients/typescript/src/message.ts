/**
 * The message that a handler receives.
 *
 * @module
 */

/**
 * One claimed inbox row, as a handler sees it. The object and its headers are frozen. The claim
 * token is not part of it: the library alone completes, retries or dead-letters the row.
 */
export interface InboxMessage {
  /** The inbox row identifier (a UUID). */
  readonly id: string;
  /** The source name, the key of the `sources` map in `queuebox.yml`. */
  readonly source: string;
  /** The deduplication key. The identity of a message is its source and this key together. */
  readonly idempotencyKey: string;
  /** The aggregate identifier: the unit of order. `null` when the source reads none. */
  readonly aggregateId: string | null;
  /** The event type, or `null`. */
  readonly eventType: string | null;
  /** The JSON body, parsed. */
  readonly payload: unknown;
  /** The stored headers, one string value per lower-case name. Empty when there are none. */
  readonly headers: Readonly<Record<string, string>>;
  /** The number of earlier failed deliveries: `0` on the first delivery. */
  readonly attempt: number;
  /** The correlation identifier, for logs, or `null`. */
  readonly correlationId: string | null;
}

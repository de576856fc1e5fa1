/**
 * What happens to a message whose handler failed: a retry after a delay, or a dead letter.
 *
 * @module
 */

import type { InboxMessage } from "./message.js";

/** The largest delay that the retry statement binds: an INT of milliseconds (about 24.8 days). */
export const MAX_DELAY_MS = 2 ** 31 - 1;

/** Retry the message after `delayMs` milliseconds; the retry raises `attempt` by one. */
export interface InboxRetry {
  readonly kind: "retry";
  readonly delayMs: number;
}

/** Move the message to `dead`; no worker claims it again. `attempt` stays as it is. */
export interface InboxDeadLetter {
  readonly kind: "dead";
}

/** The decision of a retry policy. Build one with {@link retryAfter} or {@link deadLetter}. */
export type InboxFailureAction = InboxRetry | InboxDeadLetter;

/**
 * Decides what happens to a message whose handler failed. `message.attempt` is the number of
 * earlier failed deliveries (0 on the first); `failure` is what the handler threw. The policy
 * runs after the handler's transaction has rolled back. It must not throw; a policy that throws
 * or returns something else is logged and replaced, for that message, by the default policy.
 */
export type InboxRetryPolicy = (message: InboxMessage, failure: unknown) => InboxFailureAction;

/**
 * Retry the message after `ms` milliseconds. The delay is rounded to a whole millisecond and
 * kept between 0 and 2^31 - 1; a delay that is not a number is a `RangeError`.
 */
export function retryAfter(ms: number): InboxRetry {
  if (typeof ms !== "number" || Number.isNaN(ms)) {
    throw new RangeError(`queuebox-inbox: retryAfter needs a number of milliseconds, not ${String(ms)}`);
  }
  return Object.freeze({ kind: "retry", delayMs: Math.min(Math.max(Math.round(ms), 0), MAX_DELAY_MS) });
}

/** Move the message to `dead`. */
export function deadLetter(): InboxDeadLetter {
  return DEAD;
}

const DEAD: InboxDeadLetter = Object.freeze({ kind: "dead" });

/** The settings of {@link defaultRetryPolicy}. */
export interface DefaultRetryPolicyOptions {
  /** Dead-letter when `attempt` is at least this. Default 5, so a message gets six deliveries. */
  readonly maxAttempts?: number;
  /** The delay of the first retry, in milliseconds. Default 1000. */
  readonly baseDelayMs?: number;
  /** The ceiling of the delay before the jitter, in milliseconds. Default 300000 (5 minutes). */
  readonly maxDelayMs?: number;
  /** The jitter as a fraction of the delay, shifted either way. Default 0.2 (±20 %). */
  readonly jitter?: number;
  /** The source of randomness, a number in [0, 1). Default `Math.random`. For tests. */
  readonly random?: () => number;
}

/**
 * The exponential policy with jitter: dead-letter when `attempt >= maxAttempts`; otherwise retry
 * after `min(baseDelayMs * 2^attempt, maxDelayMs)` shifted by up to ±`jitter` of itself. With the
 * defaults (5 attempts, 1000 ms base, 300000 ms ceiling, 0.2 jitter) a message that always fails
 * is delivered six times, then dead-lettered.
 */
export function defaultRetryPolicy(options: DefaultRetryPolicyOptions = {}): InboxRetryPolicy {
  const maxAttempts = options.maxAttempts ?? 5;
  const baseDelayMs = options.baseDelayMs ?? 1000;
  const maxDelayMs = options.maxDelayMs ?? 300_000;
  const jitter = options.jitter ?? 0.2;
  const random = options.random ?? Math.random;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 0) {
    throw new RangeError(`queuebox-inbox: defaultRetryPolicy maxAttempts must be an integer of 0 or more, not ${String(maxAttempts)}`);
  }
  for (const [name, value] of [["baseDelayMs", baseDelayMs], ["maxDelayMs", maxDelayMs]] as const) {
    if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
      throw new RangeError(`queuebox-inbox: defaultRetryPolicy ${name} must be a number of 0 or more, not ${String(value)}`);
    }
  }
  if (typeof jitter !== "number" || !(jitter >= 0 && jitter <= 1)) {
    throw new RangeError(`queuebox-inbox: defaultRetryPolicy jitter must be between 0 and 1, not ${String(jitter)}`);
  }
  if (typeof random !== "function") {
    throw new TypeError("queuebox-inbox: defaultRetryPolicy random must be a function");
  }
  return (message) => {
    if (message.attempt >= maxAttempts) {
      return deadLetter();
    }
    const delay = Math.min(baseDelayMs * 2 ** Math.max(message.attempt, 0), maxDelayMs);
    return retryAfter(delay * (1 + jitter * (2 * random() - 1)));
  };
}

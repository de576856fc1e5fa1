/**
 * The lease's local deadline: how long a claim or a renewal counts on the worker's clock.
 *
 * @module
 */

/** The largest margin between a row's local deadline and the end of its lease. */
const MAX_LEASE_MARGIN_MS = 10_000;

/**
 * How long a claim or a renewal counts, from the moment it was sent: the lease minus a margin of
 * a fifth of it, at most 10 seconds. The database counts the lease from when the statement ran
 * there, which is later, so the local deadline comes first; the margin absorbs a timer that
 * fires late, an event loop that was busy, and clocks that run at slightly different rates.
 */
export function leaseSpanMs(leaseMs: number): number {
  return leaseMs - Math.min(leaseMs / 5, MAX_LEASE_MARGIN_MS);
}

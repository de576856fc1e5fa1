import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { deadLetter, defaultRetryPolicy, retryAfter, type InboxMessage } from "../src/index.js";

function message(attempt: number): InboxMessage {
  return {
    id: "00000000-0000-0000-0000-000000000001", source: "orders", idempotencyKey: "k", aggregateId: null,
    eventType: null, payload: {}, headers: {}, attempt, correlationId: null,
  };
}

describe("retryAfter and deadLetter", () => {
  it("build the two actions", () => {
    assert.deepEqual(retryAfter(1500), { kind: "retry", delayMs: 1500 });
    assert.deepEqual(deadLetter(), { kind: "dead" });
  });
  it("round and bound the delay", () => {
    assert.equal(retryAfter(1.6).delayMs, 2);
    assert.equal(retryAfter(-5).delayMs, 0);
    assert.equal(retryAfter(Infinity).delayMs, 2 ** 31 - 1);
    assert.throws(() => retryAfter(Number.NaN), RangeError);
  });
});

describe("defaultRetryPolicy", () => {
  const cases: { name: string; attempt: number; random: number; want: { kind: string; delayMs?: number } }[] = [
    { name: "first failure, no jitter drawn", attempt: 0, random: 0.5, want: { kind: "retry", delayMs: 1000 } },
    { name: "second failure", attempt: 1, random: 0.5, want: { kind: "retry", delayMs: 2000 } },
    { name: "fifth failure", attempt: 4, random: 0.5, want: { kind: "retry", delayMs: 16_000 } },
    { name: "the lowest jitter: -20 %", attempt: 2, random: 0, want: { kind: "retry", delayMs: 3200 } },
    { name: "the highest jitter: +20 %", attempt: 2, random: 1, want: { kind: "retry", delayMs: 4800 } },
    { name: "attempt 5 is dead", attempt: 5, random: 0.5, want: { kind: "dead" } },
    { name: "attempt 9 is dead", attempt: 9, random: 0.5, want: { kind: "dead" } },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const policy = defaultRetryPolicy({ random: () => c.random });
      assert.deepEqual(policy(message(c.attempt), new Error("x")), c.want);
    });
  }

  it("caps the delay at the ceiling before the jitter", () => {
    const policy = defaultRetryPolicy({ maxAttempts: 30, baseDelayMs: 1000, maxDelayMs: 300_000, random: () => 0.5 });
    assert.deepEqual(policy(message(12), null), { kind: "retry", delayMs: 300_000 });
    const high = defaultRetryPolicy({ maxAttempts: 30, random: () => 1 });
    assert.deepEqual(high(message(20), null), { kind: "retry", delayMs: 360_000 });
  });

  it("stays within ±20 % with Math.random", () => {
    const policy = defaultRetryPolicy();
    for (let i = 0; i < 1000; i++) {
      const action = policy(message(3), null);
      assert.equal(action.kind, "retry");
      const delay = (action as { delayMs: number }).delayMs;
      assert.ok(delay >= 6400 && delay <= 9600, `delay ${delay}`);
    }
  });

  it("follows its settings", () => {
    const policy = defaultRetryPolicy({ maxAttempts: 2, baseDelayMs: 100, maxDelayMs: 1000, jitter: 0 });
    assert.deepEqual(policy(message(0), null), { kind: "retry", delayMs: 100 });
    assert.deepEqual(policy(message(1), null), { kind: "retry", delayMs: 200 });
    assert.deepEqual(policy(message(2), null), { kind: "dead" });
  });

  it("refuses settings that cannot work", () => {
    assert.throws(() => defaultRetryPolicy({ maxAttempts: -1 }), RangeError);
    assert.throws(() => defaultRetryPolicy({ baseDelayMs: -1 }), RangeError);
    assert.throws(() => defaultRetryPolicy({ jitter: 2 }), RangeError);
  });
});

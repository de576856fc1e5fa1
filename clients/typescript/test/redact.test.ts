import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { MAX_ERROR_LENGTH, sanitize, sanitizeError } from "../src/index.js";
import { repoRoot } from "./support.js";

interface Case {
  name: string;
  input: string;
  want: string;
}

const corpus: Case[] = JSON.parse(readFileSync(join(repoRoot, "testdata", "redaction", "corpus.json"), "utf8"));

describe("sanitize: the shared redaction corpus", () => {
  it("has cases", () => {
    assert.ok(corpus.length > 100, `only ${corpus.length} cases`);
  });
  for (const c of corpus) {
    it(c.name, () => {
      assert.equal(sanitize(c.input), c.want);
    });
  }
});

describe("sanitize", () => {
  it("is idempotent on the corpus", () => {
    for (const c of corpus) {
      assert.equal(sanitize(c.want), sanitize(sanitize(c.input)), c.name);
    }
  });

  it("never returns more than MAX_ERROR_LENGTH code points", () => {
    assert.equal(MAX_ERROR_LENGTH, 2000);
    for (const input of ["x".repeat(5000), "😀".repeat(3000), "password=" + "a".repeat(3000), "é ".repeat(3000)]) {
      assert.ok(Array.from(sanitize(input)).length <= MAX_ERROR_LENGTH);
    }
  });
});

describe("sanitizeError", () => {
  const chain = (...names: string[]): Error => {
    let error = new Error(names[names.length - 1]);
    for (let i = names.length - 2; i >= 0; i--) {
      error = new Error(names[i], { cause: error });
    }
    return error;
  };
  const cases: { name: string; error: unknown; want: string }[] = [
    { name: "undefined", error: undefined, want: "" },
    { name: "null", error: null, want: "" },
    { name: "one level", error: new Error("EOF"), want: "EOF" },
    { name: "a string", error: "boom password=x", want: "boom password=[REDACTED]" },
    { name: "a number", error: 42, want: "42" },
    { name: "an object", error: { code: "E1" }, want: '{"code":"E1"}' },
    { name: "three levels", error: chain("claiming", "querying", "connection reset"), want: "claiming | caused by querying | caused by connection reset" },
    { name: "levels after the fifth are dropped", error: chain("l1", "l2", "l3", "l4", "l5", "l6", "l7"), want: "l1 | caused by l2 | caused by l3 | caused by l4 | caused by l5" },
    {
      name: "a message that ends with its cause shows its own text",
      error: new Error("dialing: EOF", { cause: new Error("EOF") }),
      want: "dialing | caused by EOF",
    },
    {
      name: "a secret in the cause is redacted",
      error: new Error("connecting", { cause: new Error("dial postgres://app:hunter2@db:5432/app: refused") }),
      want: "connecting | caused by dial postgres://***@db:5432/app: refused",
    },
    { name: "an error without a message shows its name", error: new TypeError(), want: "TypeError" },
    { name: "a JSON syntax error", error: (() => { try { JSON.parse("{not json"); } catch (e) { return e; } })(), want: sanitize((() => { try { JSON.parse("{not json"); } catch (e) { return (e as Error).message; } return ""; })()) },
    {
      name: "a cause cycle ends",
      error: (() => { const e = new Error("loop") as Error & { cause?: unknown }; e.cause = e; return e; })(),
      want: "loop",
    },
    {
      name: "a long chain is cut to MAX_ERROR_LENGTH",
      error: new Error("outer", { cause: new Error("x".repeat(3000)) }),
      want: "outer | caused by " + "x".repeat(MAX_ERROR_LENGTH - "outer | caused by ".length - "...[truncated]".length) + "...[truncated]",
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.equal(sanitizeError(c.error), c.want);
    });
  }
});

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { defaultSchema, inboxSql, type InboxDialect, type InboxSchema, type InboxStatementName } from "../src/index.js";
import { repoRoot } from "./support.js";

const dialects: InboxDialect[] = ["postgresql", "sqlserver"];
const names: InboxStatementName[] = ["claim", "renew", "complete", "retry", "dead"];

/** The parameters of each statement in order of first appearance (examples/pull/sqlfile_test.go). */
const parameters: Record<InboxStatementName, string[]> = {
  claim: ["source", "cand_limit", "batch", "lease_ms"],
  renew: ["lease_ms", "id", "token"],
  complete: ["id", "token"],
  retry: ["delay_ms", "error", "id", "token"],
  dead: ["error", "id", "token"],
};

function contractFile(dialect: InboxDialect, name: InboxStatementName): string {
  return readFileSync(join(repoRoot, "examples", "pull", "sql", dialect, `${name}.sql`), "utf8");
}

/** Every table and column renamed, as examples/pull/names_test.go does. */
const everyNameMapped: InboxSchema = Object.fromEntries(
  Object.entries(defaultSchema).map(([key, value]) => [key, key === "table" ? "app_messages" : `m_${value}`]),
) as unknown as InboxSchema;

describe("inboxSql", () => {
  for (const dialect of dialects) {
    for (const name of names) {
      it(`${dialect} ${name}: the package runs the contract file byte for byte`, () => {
        const statement = inboxSql(dialect)[name];
        const file = contractFile(dialect, name);
        assert.equal(statement.contract, file);
        assert.deepEqual([...statement.parameters], parameters[name]);
        // The text to run is the file with only the placeholders replaced.
        let back = statement.text;
        if (dialect === "postgresql") {
          back = back.replace(/\$(\d+)/g, (_, n: string) => ":" + statement.parameters[Number(n) - 1]);
        } else {
          for (const p of statement.parameters) {
            back = back.replace(new RegExp(`@${p}\\b`, "g"), ":" + p);
          }
        }
        assert.equal(back, file);
        assert.doesNotMatch(statement.text, /(?<!:):[a-z_]+/, "a placeholder is left");
      });
    }
  }

  it("defaults to PostgreSQL and the default schema", () => {
    assert.equal(inboxSql().claim.text, inboxSql("postgresql", defaultSchema).claim.text);
  });

  it("numbers a repeated PostgreSQL parameter once", () => {
    const claim = inboxSql("postgresql").claim;
    assert.equal(claim.text.match(/\$1\b/g)?.length, contractFile("postgresql", "claim").match(/:source\b/g)?.length);
    assert.doesNotMatch(claim.text, /\$5/);
  });

  it("quotes a mapped table and a mapped column on PostgreSQL and leaves the rest alone", () => {
    const sql = inboxSql("postgresql", { ...defaultSchema, table: "qb_inbox", idempotencyKey: "dedup_key" });
    assert.match(sql.claim.text, /FROM "qb_inbox" AS i/);
    assert.match(sql.claim.text, /t\."dedup_key"/);
    assert.doesNotMatch(sql.claim.text, /\binbox\b(?!")/);
    assert.match(sql.claim.text, /i\.consumption = 'pull'/);
    assert.match(sql.complete.text, /UPDATE "qb_inbox" AS t/);
    // Comments keep their words.
    assert.match(sql.claim.text, /-- QueueBox pull claim \(PostgreSQL\)/);
  });

  for (const dialect of dialects) {
    it(`${dialect}: renaming every name leaves no default name outside strings and comments`, () => {
      const sql = inboxSql(dialect, everyNameMapped);
      const quote = dialect === "postgresql" ? (s: string) => `"${s}"` : (s: string) => `[${s}]`;
      for (const name of names) {
        const text = sql[name].text;
        assert.deepEqual([...sql[name].parameters], parameters[name]);
        const code = text
          .replace(/--[^\n]*/g, "")
          .replace(/'[^']*'/g, "''")
          .replace(/"[^"]*"/g, '""')
          .replace(/\[[^\]]*\]/g, "[]");
        for (const column of Object.values(defaultSchema)) {
          assert.doesNotMatch(code, new RegExp(`(?<![@:\\w])${column}(?!\\w)`), `${name}: ${column} is left`);
        }
        assert.ok(text.includes(quote("app_messages")), `${name}: the table is not rendered`);
      }
      if (dialect === "sqlserver") {
        assert.ok(sql.claim.text.includes("inserted.[m_id]"));
        assert.ok(sql.claim.text.includes("@qb_now"));
        assert.ok(sql.claim.text.includes("@Resource = @source"));
      }
    });
  }

  const refused: { name: string; schema: Partial<Record<keyof InboxSchema, unknown>> }[] = [
    { name: "a quote", schema: { table: 'qb"inbox' } },
    { name: "a statement", schema: { table: "qb_inbox; DROP TABLE orders" } },
    { name: "a qualified name", schema: { table: "public.qb_inbox" } },
    { name: "a space", schema: { idempotencyKey: "dedup key" } },
    { name: "a bracket", schema: { idempotencyKey: "dedup]key" } },
    { name: "a leading digit", schema: { idempotencyKey: "1dedup" } },
    { name: "an empty name", schema: { payload: "" } },
    { name: "a name that is not a string", schema: { payload: 7 } },
    { name: "a computed column name", schema: { payload: "qb_now" } },
    { name: "a computed column name in upper case", schema: { payload: "QB_RANK" } },
    { name: "two columns with one name", schema: { payload: "headers" } },
    { name: "a PostgreSQL name longer than 63 characters", schema: { table: "t".repeat(64) } },
    { name: "an unknown key", schema: { idempotency_key: "dedup_key" } as never },
  ];
  for (const c of refused) {
    it(`refuses ${c.name}`, () => {
      assert.throws(() => inboxSql("postgresql", { ...defaultSchema, ...c.schema } as InboxSchema), TypeError);
    });
  }

  it("refuses a schema without every name", () => {
    assert.throws(() => inboxSql("postgresql", { table: "qb_inbox" } as InboxSchema), /schema\.id is missing/);
  });

  it("refuses an unknown dialect", () => {
    assert.throws(() => inboxSql("mysql" as InboxDialect), TypeError);
  });
});

// The SQL Server adapter against a stand-in for the mssql module (no SQL Server runs on these
// machines): how it binds values, reads rows and counts, and recognises Msg 51000. A typed use
// with the real mssql types checks that the real module and pool fit its parameters.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import mssql from "mssql";

import { InboxWorker, fromMssql, inboxSql, type InboxConnection } from "../src/index.js";

interface Call {
  parent: unknown;
  inputs: [string, unknown, unknown][];
  arrayRowMode: boolean;
  text: string;
}

function fakeMssql(respond: (call: Call) => { recordset?: unknown[]; rowsAffected: number[] } | Error) {
  const calls: Call[] = [];
  const events: string[] = [];
  class Request {
    arrayRowMode = false;
    readonly call: Call;
    constructor(parent: unknown) {
      this.call = { parent, inputs: [], arrayRowMode: false, text: "" };
    }
    input(name: string, type: unknown, value: unknown) {
      this.call.inputs.push([name, type, value]);
      return this;
    }
    async query(text: string) {
      this.call.text = text;
      this.call.arrayRowMode = this.arrayRowMode;
      calls.push(this.call);
      const out = respond(this.call);
      if (out instanceof Error) {
        throw out;
      }
      return out;
    }
  }
  class Transaction {
    constructor(readonly pool: unknown) {}
    async begin() {
      events.push("begin");
      return this;
    }
    async commit() {
      events.push("commit");
    }
    async rollback() {
      events.push("rollback");
    }
  }
  const module = {
    Request,
    Transaction,
    NVarChar: (length?: number) => `NVarChar(${length})`,
    Int: "Int",
    UniqueIdentifier: "UniqueIdentifier",
    MAX: -1,
  };
  return { module, calls, events };
}

describe("fromMssql", () => {
  it("binds every parameter under its name with its SQL Server type, and reads rows as arrays", async () => {
    const pool = { config: { requestTimeout: 30_000 } };
    const fake = fakeMssql(() => ({ recordset: [["id-1", "orders"]], rowsAffected: [0, 1] }));
    const connection = fromMssql(fake.module, pool);
    assert.equal(connection.dialect, "sqlserver");
    const sql = inboxSql("sqlserver");
    const result = await connection.execute(sql.retry, { id: "A", token: "B", delay_ms: 100, error: "boom" });
    assert.deepEqual(result, { rows: [["id-1", "orders"]], rowCount: 1 });
    const [call] = fake.calls;
    assert.equal(call!.parent, pool);
    assert.equal(call!.arrayRowMode, true);
    assert.equal(call!.text, sql.retry.text);
    assert.deepEqual(call!.inputs, [
      ["delay_ms", "Int", 100],
      ["error", "NVarChar(-1)", "boom"],
      ["id", "UniqueIdentifier", "A"],
      ["token", "UniqueIdentifier", "B"],
    ]);
    await connection.execute(sql.claim, { source: "orders", batch: 2, lease_ms: 30_000, cand_limit: 50 });
    assert.deepEqual(fake.calls[1]!.inputs.map(([name, type]) => [name, type]), [
      ["source", "NVarChar(4000)"], ["cand_limit", "Int"], ["batch", "Int"], ["lease_ms", "Int"],
    ]);
  });

  it("runs the handler's statements on its transaction and ends it once", async () => {
    const fake = fakeMssql(() => ({ rowsAffected: [1] }));
    const connection = fromMssql(fake.module, {});
    const tx = await connection.begin();
    await tx.execute(inboxSql("sqlserver").complete, { id: "A", token: "B" });
    assert.equal(fake.calls[0]!.parent, tx.handle);
    await tx.commit();
    await assert.rejects(tx.rollback(), /has ended/);
    assert.deepEqual(fake.events, ["begin", "commit"]);
  });

  it("recognises Msg 51000 as transient, wherever mssql puts the number", () => {
    const connection = fromMssql(fakeMssql(() => ({ rowsAffected: [] })).module, {});
    const lock = Object.assign(new Error("inbox pull claim: sp_getapplock did not acquire the per-source claim lock"), { number: 51000 });
    const wrapped = Object.assign(new Error("request failed"), { originalError: { info: { number: 51000 } } });
    assert.equal(connection.isTransientClaimError!(lock), true);
    assert.equal(connection.isTransientClaimError!(wrapped), true);
    assert.equal(connection.isTransientClaimError!(Object.assign(new Error("deadlock"), { number: 1205 })), false);
    assert.equal(connection.isTransientClaimError!(new Error("plain")), false);
  });

  it("warns about a request timeout below 30 seconds", () => {
    const fake = fakeMssql(() => ({ rowsAffected: [] }));
    const worker = new InboxWorker(fromMssql(fake.module, { config: {} }), { source: "orders" });
    assert.equal(worker.options.dialect, "sqlserver");
    const warnings = fromMssql(fake.module, { config: { requestTimeout: 15_000 } }).warnings!(worker.options);
    assert.match(warnings.join("\n"), /requestTimeout is 15000 ms; set it to at least 30000/);
    assert.deepEqual(fromMssql(fake.module, { config: { requestTimeout: 30_000 } }).warnings!(worker.options), []);
  });

  it("refuses a dialect that contradicts the adapter", () => {
    const fake = fakeMssql(() => ({ rowsAffected: [] }));
    assert.throws(() => new InboxWorker(fromMssql(fake.module, {}), { source: "orders", dialect: "postgresql" }), /speaks "sqlserver"/);
  });

  it("refuses arguments in the wrong order", () => {
    assert.throws(() => fromMssql({} as never, {}), /mssql module/);
  });

  it("fits the real mssql module and pool types", () => {
    // Type-level check: this compiles only if the real module and pool fit the adapter.
    const build = (pool: mssql.ConnectionPool): InboxConnection<mssql.Transaction> => fromMssql(mssql, pool);
    assert.equal(typeof build, "function");
  });
});

// The worker of the tutorial "Receive a webhook" (spec/33), as plain JavaScript that Node 20
// runs as it is: `node worker.mjs`. The tutorial's worker.ts needs Node 22.18 or later, which
// runs TypeScript directly; this file is the same program without the one type annotation.
//
// Copy it into the tutorial's orders-worker folder (after `npm install
// @alternayte/queuebox-inbox pg`), or run it from clients/typescript of a checkout after `npm
// ci && npm run build` (the package imports itself by name). DATABASE_URL overrides the
// tutorial's database. test/worker-example.test.ts runs this file against PostgreSQL.
import pg from "pg";
import { InboxWorker, fromPg } from "@alternayte/queuebox-inbox";

const stopping = new AbortController();
process.on("SIGINT", () => stopping.abort());
process.on("SIGTERM", () => stopping.abort());

const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL ?? "postgres://queuebox:queuebox@localhost:5432/queuebox",
});
const worker = new InboxWorker(fromPg(pool), { source: "orders" });

console.log("Waiting for messages of the source 'orders'. Press Ctrl+C to stop.");
await worker.run(async (message, tx) => {
  const order = message.payload; // { id: string; total: number }
  await tx.query("INSERT INTO orders (id, total) VALUES ($1, $2)", [order.id, order.total]);
  console.log(`Stored the order ${message.idempotencyKey}.`);
}, stopping.signal);
await pool.end();

// Test support: a running `queuebox serve` of this checkout, and an HTTP receiver for its
// destination. The command is QUEUEBOX_TEST_BINARY, or built once with `go build ./local` from
// the repository root (the build cache makes that quick after the Go tests).
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { createServer as createNetServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { repoRoot, waitFor } from "./support.js";

let built: string | undefined;

/** The path of a queuebox command. */
export function queueboxBinary(): string {
  if (process.env.QUEUEBOX_TEST_BINARY) {
    return process.env.QUEUEBOX_TEST_BINARY;
  }
  if (built === undefined) {
    const out = join(mkdtempSync(join(tmpdir(), "qb-ts-bin-")), "queuebox");
    try {
      execFileSync("go", ["build", "-o", out, "./local"], { cwd: repoRoot, stdio: "pipe" });
    } catch (error) {
      const e = error as { stderr?: Buffer; message: string };
      throw new Error(`building queuebox (go build ./local in ${repoRoot}; needs Go, or set QUEUEBOX_TEST_BINARY): ${e.message}\n${e.stderr?.toString() ?? ""}`);
    }
    built = out;
  }
  return built;
}

/** One request that the receiver got. */
export interface Delivery {
  body: unknown;
  headers: IncomingHttpHeaders;
}

/** An HTTP destination that answers 200 and records each request. */
export interface Receiver {
  url: string;
  deliveries: Delivery[];
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const deliveries: Delivery[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // kept as text
      }
      deliveries.push({ body, headers: req.headers });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    deliveries,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A running `queuebox serve`. */
export interface QueueBox {
  log(): string;
  stop(): Promise<void>;
}

/**
 * Runs `queuebox serve` on `databaseUrl`, the database block extended by `databaseYaml`
 * (indented by two spaces), routing order.* to `receiverUrl`, and waits until /health answers 200.
 */
export async function startQueueBox(databaseUrl: string, databaseYaml: string, receiverUrl: string): Promise<QueueBox> {
  const bin = queueboxBinary();
  const port = await freePort();
  const u = new URL(databaseUrl);
  const username = decodeURIComponent(u.username);
  // QueueBox requires a password even where the server trusts the test user.
  const password = u.password ? decodeURIComponent(u.password) : "unused-by-trust-auth";
  u.username = "";
  u.password = "";
  const config = `server:
  httpPort: ${port}
database:
  url: ${JSON.stringify(u.toString())}
  username: ${JSON.stringify(username)}
  password: ${JSON.stringify(password)}
${databaseYaml}
outbox:
  pollIntervalMs: 50
destinations:
  receiver:
    type: http
    baseUrl: ${JSON.stringify(receiverUrl)}
    path: /hook
    timeoutMs: 10000
routes:
  - topicPattern: "order.*"
    destination: receiver
`;
  const dir = mkdtempSync(join(tmpdir(), "qb-ts-serve-"));
  const file = join(dir, "queuebox.yml");
  writeFileSync(file, config, { mode: 0o600 });
  const child: ChildProcess = spawn(bin, ["serve"], {
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", QUEUEBOX_CONFIG_FILE: file },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (c: Buffer) => (output = (output + c.toString()).slice(-20_000)));
  child.stderr!.on("data", (c: Buffer) => (output = (output + c.toString()).slice(-20_000)));
  let exited = false;
  const exit = new Promise<void>((resolve) => child.on("exit", () => {
    exited = true;
    resolve();
  }));
  const stop = async () => {
    if (!exited) {
      child.kill("SIGTERM");
    }
    await exit;
  };
  try {
    await waitFor("queuebox serve to answer 200 on /health", async () => {
      if (exited) {
        throw new Error(`queuebox serve exited:\n${output}`);
      }
      const response = await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined);
      return response?.status === 200;
    }, 90_000, 100);
  } catch (error) {
    await stop();
    throw new Error(`${(error as Error).message}\nlog:\n${output}`);
  }
  return { log: () => output, stop };
}

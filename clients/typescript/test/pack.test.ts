// `npm pack` builds the package from its sources (the prepack script) and the tarball holds
// the entry points of package.json; installed from the tarball into a new project, it loads as
// ESM and as CommonJS, and its types compile with `tsc` in a project that has only `pg` (and its
// types) and `typescript`: `@opentelemetry/api` is an optional peer dependency, so the published
// types must not need it. The package is copied to a temporary folder first, so the build there
// does not touch dist/ that the other test files load.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";

import { packageRoot, repoRoot } from "./support.js";

const manifest = JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8"));
const lock = JSON.parse(readFileSync(join(packageRoot, "package-lock.json"), "utf8"));
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

/** The version of a development dependency that the lock file pins, so npm finds it in its cache. */
function locked(name: string): string {
  const version = lock.packages?.[`node_modules/${name}`]?.version;
  assert.ok(version, `package-lock.json pins ${name}`);
  return `${name}@${version}`;
}

describe("npm pack", () => {
  const work = mkdtempSync(join(tmpdir(), "qb-ts-pack-"));
  after(() => rmSync(work, { recursive: true, force: true }));
  let tarball: string | undefined;

  it("builds the package and the tarball holds every entry point, and nothing of src or test", () => {
    // The layout that scripts/generate-sql.mjs expects: clients/typescript beside examples/pull/sql.
    const copy = join(work, "repo", "clients", "typescript");
    mkdirSync(copy, { recursive: true });
    for (const name of ["package.json", "package-lock.json", "README.md", "LICENSE", "tsconfig.base.json", "tsconfig.json", "tsconfig.cjs.json", "scripts", "src"]) {
      cpSync(join(packageRoot, name), join(copy, name), { recursive: true });
    }
    cpSync(join(repoRoot, "examples", "pull", "sql"), join(work, "repo", "examples", "pull", "sql"), { recursive: true });
    symlinkSync(join(packageRoot, "node_modules"), join(copy, "node_modules"), "dir");
    rmSync(join(copy, "src", "generated"), { recursive: true, force: true }); // the build writes it

    const out = join(work, "out");
    mkdirSync(out);
    const report = JSON.parse(execFileSync(npm, ["pack", "--json", "--pack-destination", out], { cwd: copy, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }));
    const files: string[] = report[0].files.map((f: { path: string }) => f.path);
    const entryPoints = [
      manifest.main, manifest.module, manifest.types,
      manifest.exports["."].import.default, manifest.exports["."].import.types,
      manifest.exports["."].require.default, manifest.exports["."].require.types,
    ].map((p: string) => p.replace(/^\.\//, ""));
    for (const path of [...entryPoints, "package.json", "README.md", "LICENSE", "dist/cjs/package.json", "dist/esm/outbox.js", "dist/cjs/outbox.js"]) {
      assert.ok(files.includes(path), `the tarball holds ${path}; it has ${files.join(", ")}`);
    }
    assert.deepEqual(files.filter((f) => /^(src|test|build|scripts)\//.test(f)), []);
    assert.equal(report[0].filename, `alternayte-queuebox-inbox-${manifest.version}.tgz`);
    tarball = join(out, report[0].filename);

    // A new project with the package extracted where npm install would put it.
    const app = join(work, "app");
    const installed = join(app, "node_modules", "@alternayte", "queuebox-inbox");
    mkdirSync(installed, { recursive: true });
    execFileSync("tar", ["-xzf", join(out, report[0].filename), "-C", installed, "--strip-components=1"]);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    const esm = execFileSync(process.execPath, ["--input-type=module", "-e",
      'const m = await import("@alternayte/queuebox-inbox"); console.log(typeof m.InboxWorker, typeof m.enqueue, typeof m.fromPg)'],
    { cwd: app, encoding: "utf8" });
    assert.equal(esm.trim(), "function function function");
    const cjs = execFileSync(process.execPath, ["--input-type=commonjs", "-e",
      'const m = require("@alternayte/queuebox-inbox"); console.log(typeof m.InboxWorker, typeof m.enqueue, m.sanitize("password=x"))'],
    { cwd: app, encoding: "utf8" });
    assert.equal(cjs.trim(), "function function password=[REDACTED]");
  });

  it("has types that compile in a new project with only pg and typescript", () => {
    assert.ok(tarball, "the tarball of the test above");
    // A new project, installed by npm as an application would: the tarball, pg with its types,
    // and typescript, at the versions of this package's lock file (found in npm's cache after
    // npm ci). Nothing installs the optional peer @opentelemetry/api.
    const app = join(work, "types-app");
    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "types-app", private: true, type: "module" }));
    execFileSync(npm, [
      "install", "--no-audit", "--no-fund", "--prefer-offline", "--ignore-scripts", "--loglevel=error",
      tarball, locked("pg"), locked("@types/pg"), locked("typescript"),
    ], { cwd: app, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    assert.equal(existsSync(join(app, "node_modules", "@opentelemetry", "api")), false, "the optional peer @opentelemetry/api is not installed");

    // The README's worker, as ESM and as CommonJS, under tsc's defaults for library checks
    // (skipLibCheck off: every declaration file of the package is checked).
    const worker = `
      const pool = new pg.Pool({ connectionString: "postgres://localhost/app" });
      const options: qb.InboxOptions = { source: "orders", batchSize: 10, leaseMs: 30_000 };
      const worker = new qb.InboxWorker(qb.fromPg(pool), options);
      const stopping = new AbortController();
      const handler: qb.InboxHandler<pg.PoolClient> = async (message, tx, signal) => {
        const order = message.payload as { id: string; total: number };
        await tx.query("INSERT INTO orders (id, total) VALUES ($1, $2)", [order.id, order.total]);
        signal.throwIfAborted();
      };
      export async function main(): Promise<void> {
        await worker.run(handler, stopping.signal);
      }
    `;
    writeFileSync(join(app, "worker.mts"), `import pg from "pg";\nimport * as qb from "@alternayte/queuebox-inbox";\n${worker}`);
    writeFileSync(join(app, "worker.cts"), `import pg = require("pg");\nimport qb = require("@alternayte/queuebox-inbox");\n${worker}`);
    writeFileSync(join(app, "tsconfig.json"), JSON.stringify({
      compilerOptions: { module: "nodenext", moduleResolution: "nodenext", target: "es2022", strict: true, noEmit: true, skipLibCheck: false },
      files: ["worker.mts", "worker.cts"],
    }));
    const tsc = join(app, "node_modules", "typescript", "bin", "tsc");
    try {
      execFileSync(process.execPath, [tsc, "-p", "tsconfig.json"], { cwd: app, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    } catch (error) {
      const e = error as { stdout?: string; stderr?: string };
      assert.fail(`tsc failed in a project without @opentelemetry/api:\n${e.stdout ?? ""}${e.stderr ?? ""}`);
    }
  });
});

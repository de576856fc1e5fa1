// Small build steps that must work on every platform without a shell:
//   node scripts/build-step.mjs clean <dir>...   removes the folders
//   node scripts/build-step.mjs mark-cjs         writes dist/cjs/package.json {"type":"commonjs"}
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const packageRoot = join(dirname(fileURLToPath(import.meta.url)), "..");
const [step, ...args] = process.argv.slice(2);

switch (step) {
  case "clean":
    for (const dir of args) {
      rmSync(join(packageRoot, dir), { recursive: true, force: true });
    }
    break;
  case "mark-cjs": {
    const dir = join(packageRoot, "dist", "cjs");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "commonjs" }, null, 2) + "\n");
    break;
  }
  default:
    console.error(`unknown build step ${JSON.stringify(step)}`);
    process.exit(2);
}

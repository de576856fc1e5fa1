// Runs the pinned Redocly CLI (package.json) on an OpenAPI file with the rules of redocly.yaml,
// prints every problem, and fails on any error or warning: `redocly lint` itself fails on
// errors only. Usage: node lint.mjs <openapi.yaml>
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const file = process.argv[2];
if (!file) {
  console.error('usage: node lint.mjs <openapi.yaml>');
  process.exit(2);
}

const run = spawnSync(
  process.execPath,
  [join(here, 'node_modules/@redocly/cli/bin/cli.js'), 'lint', file, '--config', join(here, 'redocly.yaml'), '--format=json', '--max-problems=1000'],
  {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
  },
);

let report;
try {
  report = JSON.parse(run.stdout);
} catch {
  // No report: the CLI did not run (missing install, a broken config); show what it said.
  process.stderr.write(run.stderr || '');
  process.stdout.write(run.stdout || '');
  console.error(`lint-openapi: redocly lint gave no report (exit ${run.status ?? run.signal})`);
  process.exit(1);
}

for (const p of report.problems) {
  const at = p.location?.[0];
  const where = at ? `${at.source?.ref ?? file}:${at.start?.line ?? '?'}:${at.start?.col ?? '?'}` : file;
  console.log(`${where} ${p.severity} ${p.ruleId}: ${p.message}${at?.pointer ? ` (${at.pointer})` : ''}`);
}
const { errors, warnings } = report.totals;
console.log(`lint-openapi: ${file}: ${errors} errors, ${warnings} warnings (Redocly CLI ${report.version}, recommended rules)`);
process.exit(errors + warnings > 0 || run.status !== 0 ? 1 : 0);

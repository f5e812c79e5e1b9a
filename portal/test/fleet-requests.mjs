// Measures what the Fleet page asks of egsd at the simulated 5,000-node fleet of big-fleet.mjs:
// API requests and response bytes (as received, compressed) over a window after the first load.
// Not part of CI; the numbers go to docs/benchmarks.md.
//
// Usage: node test/fleet-requests.mjs --egsd PATH --portal-dir DIR [--seconds 60]
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { chromium } from 'playwright-core';

import { NODES, bigFleetYaml } from './big-fleet.mjs';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const EGSD = resolve(args.egsd || '../build/release/apps/egsd/egsd');
const PORTAL = resolve(args['portal-dir'] || '../build/portal');
const SECONDS = Number(args.seconds || 60);

const dir = mkdtempSync(join(tmpdir(), 'egs-fleet-'));
writeFileSync(join(dir, 'fleet.yaml'), bigFleetYaml());
const proc = spawn(EGSD, ['--listen', '127.0.0.1:0', '--data-dir', join(dir, 'data'), '--fleet', join(dir, 'fleet.yaml'),
  '--admin-token-file', join(dir, 'token'), '--portal-dir', PORTAL, '--log-level', 'warn'], { stdio: ['ignore', 'pipe', 'pipe'] });
let output = '';
const url = await new Promise((ok, fail) => {
  const timer = setTimeout(() => fail(new Error(`egsd did not start:\n${output}`)), 120000);
  const onData = (d) => {
    output += d;
    const m = output.match(/egsd is up: (http:\/\/\S+)/);
    if (m) {
      clearTimeout(timer);
      ok(m[1]);
    }
  };
  proc.stdout.on('data', onData);
  proc.stderr.on('data', onData);
});
const token = readFileSync(join(dir, 'token'), 'utf8').trim();
const browser = await chromium.launch({
  executablePath: process.env.EGS_CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  // Requests as they start (a watch stream finishes only when it ends); bytes of those that
  // finished.
  const seen = [];
  let bytes = 0;
  page.on('request', (r) => {
    if (r.url().includes('/apis/')) seen.push({ path: new URL(r.url()).pathname + (r.url().includes('watch=1') ? '?watch' : '') });
  });
  page.on('requestfinished', async (r) => {
    if (!r.url().includes('/apis/')) return;
    const sizes = await r.sizes().catch(() => ({ responseBodySize: 0 }));
    bytes += sizes.responseBodySize;
  });
  await page.goto(`${url}/portal/`);
  await page.getByLabel('API token').fill(token);
  await page.keyboard.press('Enter');
  await page.getByTestId('who').waitFor();
  const began = Date.now();
  await page.getByRole('link', { name: 'Fleet' }).click();
  await page.getByRole('status').filter({ hasText: `${NODES} nodes` }).waitFor({ timeout: 120000 });
  const loaded = Date.now();
  seen.length = 0;
  bytes = 0;
  await page.waitForTimeout(SECONDS * 1000);
  const perMin = 60 / SECONDS;
  const nodeLists = seen.filter((s) => s.path.endsWith('/nodes')).length;
  console.log(JSON.stringify({
    nodes: NODES,
    firstLoadSeconds: (loaded - began) / 1000,
    windowSeconds: SECONDS,
    requestsPerMinute: seen.length * perMin,
    nodeListsPerMinute: nodeLists * perMin,
    megabytesPerMinute: (bytes * perMin) / 1e6,
    paths: [...new Set(seen.map((s) => s.path))],
  }));
} finally {
  await browser.close();
  proc.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}

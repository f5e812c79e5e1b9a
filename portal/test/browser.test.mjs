// Browser test of the portal: a real egsd (simulated demo fleet, temp data dir, loopback port)
// serving the assembled portal, driven by Debian's chromium through playwright-core.
//
// Usage: node test/browser.test.mjs --egsd PATH --portal-dir DIR [--fleet FILE] [--out DIR]
// Exits non-zero when a step fails or the page logged a console error. Screenshots go to --out.
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';

import { chromium } from 'playwright-core';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const EGSD = resolve(args.egsd || '../build/release/apps/egsd/egsd');
const PORTAL = resolve(args['portal-dir'] || '../build/portal');
const FLEET = resolve(args.fleet || '../deploy/fleets/demo.yaml');
const OUT = resolve(args.out || '../build/portal-test');
const CHROMIUM = process.env.EGS_CHROMIUM || '/usr/bin/chromium';
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

const t0 = Date.now();
const log = (msg) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
let passed = 0;
let failed = 0;

function assert(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

// ---- egsd ------------------------------------------------------------------------------------

async function startEgsd(dir) {
  const proc = spawn(
    EGSD,
    ['--listen', '127.0.0.1:0', '--data-dir', join(dir, 'data'), '--fleet', FLEET,
      '--admin-token-file', join(dir, 'token'), '--portal-dir', PORTAL, '--log-level', 'warn'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const url = await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`egsd did not start in 60s:\n${output}`)), 60000);
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
    proc.on('exit', (code) => fail(new Error(`egsd exited with ${code}:\n${output}`)));
  });
  proc.stdout.resume();
  proc.stderr.resume();
  return { proc, url, token: readFileSync(join(dir, 'token'), 'utf8').trim(), output: () => output };
}

async function api(egsd, method, path, body, token = egsd.token) {
  const res = await fetch(egsd.url + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json().catch(() => null);
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

// ---- the test --------------------------------------------------------------------------------

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'egs-portal-test-'));
  mkdirSync(OUT, { recursive: true });
  const egsd = await startEgsd(dir);
  log(`egsd up at ${egsd.url}`);
  const context = await chromium.launchPersistentContext(join(dir, 'chromium-profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
  });
  const consoleErrors = [];
  const firstLoad = [];
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(15000);
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(`console: ${m.text()} (${JSON.stringify(m.location())})`);
  });
  page.on('pageerror', (e) => consoleErrors.push(`page error: ${e.message}`));
  page.on('response', async (r) => {
    if (r.url().includes('/portal/')) firstLoad.push(r);
  });

  const step = async (name, fn) => {
    const start = Date.now();
    try {
      await fn();
      passed += 1;
      log(`ok   ${name} (${((Date.now() - start) / 1000).toFixed(1)}s)`);
    } catch (e) {
      failed += 1;
      log(`FAIL ${name}: ${e.stack || e}`);
      await page.screenshot({ path: join(OUT, `failed-${name.replace(/\W+/g, '-')}.png`), fullPage: true }).catch(() => {});
      throw e;
    }
  };
  // Accessibility: axe-core's WCAG 2 A/AA rules on the page as it is (labels, names, contrast,
  // landmarks...); any violation fails the step.
  const a11y = async (what) => {
    if (!(await page.evaluate(() => typeof window.axe === 'object'))) await page.addScriptTag({ path: AXE });
    const result = await page.evaluate(() =>
      window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } }),
    );
    const found = result.violations.map(
      (v) => `${v.id} (${v.impact}): ${v.help}: ${v.nodes.map((n) => n.target.join(' ')).slice(0, 5).join(', ')}`,
    );
    assert(found.length === 0, `accessibility violations on ${what}:\n${found.join('\n')}`);
    a11yChecked.push(what);
  };
  const a11yChecked = [];
  const shot = (name) => page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });
  const card = (name) => page.locator(`[data-testid="request"][data-name="${name}"]`);

  try {
    await step('first load is small', async () => {
      await page.goto(`${egsd.url}/portal/`);
      await page.getByLabel('API token').waitFor();
      let raw = 0;
      let gz = 0;
      const files = [];
      for (const r of firstLoad.splice(0)) {
        const body = await r.body();
        raw += body.length;
        gz += gzipSync(body, { level: 9 }).length;
        files.push(new URL(r.url()).pathname);
      }
      log(`first load: ${files.length} files, ${(raw / 1024).toFixed(1)} KB raw, ${(gz / 1024).toFixed(1)} KB gzip`);
      assert(gz <= 300 * 1024, `first load ${gz} bytes compressed > 300 KB`);
      await shot('01-sign-in');
      await a11y('sign-in');
    });

    await step('sign in with the keyboard', async () => {
      await page.getByLabel('API token').focus();
      await page.keyboard.type(egsd.token);
      await page.keyboard.press('Enter');
      const who = page.getByTestId('who');
      await who.waitFor();
      const text = await who.innerText();
      assert(/admin/.test(text), `header shows the admin user and role: ${text}`);
      assert((await page.getByText('Loading the EGS portal').count()) === 0, 'placeholder replaced');
      const stored = await page.evaluate(() => [sessionStorage.getItem('egs.token'), localStorage.length]);
      assert(stored[0] === egsd.token && stored[1] === 0, 'token in sessionStorage only');
    });

    await step('workspaces show quota and policy', async () => {
      await page.getByRole('link', { name: 'Workspaces' }).click();
      await page.getByRole('heading', { name: 'llm-training' }).waitFor();
      const cards = await page.locator('article.card').count();
      assert(cards === 4, `4 workspaces, got ${cards}`);
      await page.getByText('Up to 128 GPUs in use at once.').waitFor();
      await page.getByText('0 of 128 GPUs used, 128 free').waitFor();
      await a11y('workspaces');
    });

    await step('inventory shows free nodes per shape and cluster', async () => {
      await page.getByRole('link', { name: 'Inventory' }).click();
      const row = page.getByRole('row', { name: /8xh100-80gb.*aws-us-east/ });
      await row.waitFor();
      const free = await row.getByTestId('free-now').innerText();
      assert(free === '16', `16 H100 nodes free in aws-us-east, got ${free}`);
      assert((await page.getByRole('row').count()) === 7, '6 pools and a header row');
      await a11y('inventory');
    });

    const name = 'portal-e2e';
    await step('quote over every acceptable shape and cluster, pick, submit', async () => {
      await page.getByRole('link', { name: 'New request' }).click();
      await page.getByLabel('Workspace').selectOption('llm-training');
      await page.getByLabel('Nodes').fill('2');
      await page.getByLabel('Duration').fill('1h');
      await page.getByRole('button', { name: 'Get wait time' }).click();
      const rows = page.locator('.quote tbody tr');
      await rows.first().waitFor();
      const n = await rows.count();
      assert(n === 4, `4 options (2 shapes x 2 clusters), got ${n}`);
      const text = await page.locator('.quote').innerText();
      assert(/\$\d+\.\d\d/.test(text), 'a price is shown');
      // Pick the A100 row in gcp-eu-west explicitly (keyboard: focus its radio, select with Space).
      const radio = page.getByLabel('Pick 8xa100-40gb in gcp-eu-west');
      await radio.focus();
      await page.keyboard.press('Space');
      assert(await radio.isChecked(), 'picked row is checked');
      await shot('02-quote');
      await a11y('new request with its quote');
      await page.getByLabel('Request name').fill(name);
      await page.getByRole('button', { name: /Submit request on 8xa100-40gb in gcp-eu-west/ }).click();
      await page.getByTestId('submitted').waitFor();
    });

    await step('a node failure is a warning (API), seen later behind the bell', async () => {
      await api(egsd, 'POST', '/apis/egs.dev/v1alpha1/nodes/use-l40s-000/fail', {});
    });

    await step('the request goes active with a progress bar', async () => {
      await page.getByRole('link', { name: 'My requests' }).click();
      await card(name).waitFor();
      const phase = card(name).locator('.phase');
      await phase.filter({ hasText: /^Active$/ }).waitFor({ timeout: 120000 });
      const info = await card(name).innerText();
      assert(/8xa100-40gb/.test(info) && /gcp-eu-west/.test(info), `placed as picked: ${info}`);
      await card(name).getByRole('progressbar').waitFor();
      await shot('03-active');
      await a11y('my requests');
    });

    await step('the bell counts the warning', async () => {
      await page.getByRole('link', { name: /Events.*: [1-9]\d* warnings? in the last hour/ }).waitFor();
      await api(egsd, 'POST', '/apis/egs.dev/v1alpha1/nodes/use-l40s-000/recover', {});
    });

    await step('extend with impact preview', async () => {
      await card(name).getByRole('button', { name: 'Preview impact' }).click();
      await card(name).getByText(/No queued request would start later|would move/).waitFor();
      await card(name).getByRole('button', { name: 'Extend', exact: true }).click();
      await page.getByTestId('notice').filter({ hasText: `${name} extended by 1h` }).waitFor();
      const g = await api(egsd, 'GET', `/apis/egs.dev/v1alpha1/namespaces/llm-training/gpuprovisionrequests/${name}`);
      const hours = (Date.parse(g.status.endTime) - Date.parse(g.status.startTime)) / 3600e3;
      assert(Math.abs(hours - 2) < 0.01, `window is 2h after extending, got ${hours}h`);
    });

    await step('early release', async () => {
      await card(name).getByRole('button', { name: `Release ${name} now` }).click();
      await card(name).locator('.phase').filter({ hasText: /^Released$/ }).waitFor({ timeout: 60000 });
    });

    await step('events are searchable', async () => {
      await page.getByRole('link', { name: 'Events' }).click();
      await page.getByLabel('Search').fill(name);
      const rows = page.getByTestId('event');
      await rows.filter({ hasText: 'Active' }).first().waitFor();
      const all = await rows.allInnerTexts();
      assert(all.length >= 2 && all.every((t) => t.includes(name)), `only ${name}'s events: ${all.join(' | ')}`);
      await page.getByLabel('Search').fill('no-such-thing-anywhere');
      await page.getByText('0 events.').waitFor();
      await page.getByLabel('Search').fill('');
      await page.getByTestId('event').first().waitFor();
      await a11y('events');
      await page.getByRole('link', { name: 'My requests' }).click();
    });

    await step('queued request: why it waits, edit, delete', async () => {
      // Fill the sandbox's only allowed pool past one request so the second waits.
      const spec = { shape: '4xl40s-48gb', nodes: 2, duration: '2h', priority: 10 };
      const gpr = (n) => ({ apiVersion: 'egs.dev/v1alpha1', kind: 'GPUProvisionRequest', metadata: { name: n, namespace: 'sandbox' }, spec });
      await api(egsd, 'POST', '/apis/egs.dev/v1alpha1/namespaces/sandbox/gpuprovisionrequests', gpr('first-one'));
      await api(egsd, 'POST', '/apis/egs.dev/v1alpha1/namespaces/sandbox/gpuprovisionrequests', gpr('waits'));
      const waiting = card('waits');
      await waiting.waitFor();
      await waiting.getByTestId('queue-position').waitFor();
      await waiting.getByText(/maximum of requests at once/).waitFor();
      await waiting.getByRole('button', { name: 'Why does it wait?' }).click();
      await waiting.locator('pre.why').waitFor();
      await waiting.getByRole('button', { name: 'Edit waits' }).click();
      await waiting.getByLabel('Duration').fill('1h');
      await waiting.getByRole('button', { name: 'Save changes' }).click();
      await page.getByTestId('notice').filter({ hasText: 'waits changed.' }).waitFor();
      const edited = await api(egsd, 'GET', '/apis/egs.dev/v1alpha1/namespaces/sandbox/gpuprovisionrequests/waits');
      assert(edited.spec.duration === '1h', `duration edited to 1h, got ${edited.spec.duration}`);
      await waiting.getByRole('button', { name: 'Delete waits' }).click();
      await waiting.waitFor({ state: 'detached' });
    });

    await step('admin approves a request over policy, changes a priority, reorders', async () => {
      await api(egsd, 'POST', '/apis/egs.dev/v1alpha1/namespaces/vision/gpuprovisionrequests', {
        apiVersion: 'egs.dev/v1alpha1', kind: 'GPUProvisionRequest', metadata: { name: 'big-one', namespace: 'vision' },
        spec: { shape: '8xa100-40gb', nodes: 6, duration: '2h', priority: 100 },
      });
      await page.getByRole('link', { name: 'Queue (admin)' }).click();
      const row = page.locator('[data-testid="queue-row"][data-name="big-one"]');
      await row.getByText('PendingApproval').waitFor();
      await shot('04-admin-queue');
      await a11y('admin queue');
      await row.getByRole('button', { name: 'Approve big-one' }).click();
      await row.locator('.phase').filter({ hasText: /^(Queued|Provisioning|Active)$/ }).waitFor();
      const g = await api(egsd, 'GET', '/apis/egs.dev/v1alpha1/namespaces/vision/gpuprovisionrequests/big-one');
      assert(g.status.phase !== 'PendingApproval', `approved: ${g.status.phase}`);
      // sandbox runs one request at a time and first-one holds it: "later" stays queued.
      await api(egsd, 'POST', '/apis/egs.dev/v1alpha1/namespaces/sandbox/gpuprovisionrequests', {
        apiVersion: 'egs.dev/v1alpha1', kind: 'GPUProvisionRequest', metadata: { name: 'later', namespace: 'sandbox' },
        spec: { shape: '4xl40s-48gb', nodes: 1, duration: '1h', priority: 10 },
      });
      const later = page.locator('[data-testid="queue-row"][data-name="later"]');
      await later.locator('.phase').filter({ hasText: /^Queued$/ }).waitFor();
      await later.getByLabel('Priority').fill('60');
      await later.getByRole('button', { name: 'Set priority' }).click();
      await page.getByText('Priority of sandbox/later: done.').waitFor();
      const l = await api(egsd, 'GET', '/apis/egs.dev/v1alpha1/namespaces/sandbox/gpuprovisionrequests/later');
      assert(l.spec.priority === 60, `priority is 60, got ${l.spec.priority}`);
      // Reorder: "soon" queues behind "later" (lower priority), then moves up before it.
      await api(egsd, 'POST', '/apis/egs.dev/v1alpha1/namespaces/sandbox/gpuprovisionrequests', {
        apiVersion: 'egs.dev/v1alpha1', kind: 'GPUProvisionRequest', metadata: { name: 'soon', namespace: 'sandbox' },
        spec: { shape: '4xl40s-48gb', nodes: 1, duration: '30m', priority: 5 },
      });
      const position = async (n) =>
        (await api(egsd, 'GET', `/apis/egs.dev/v1alpha1/namespaces/sandbox/gpuprovisionrequests/${n}`)).status.queuePosition;
      const soon = page.locator('[data-testid="queue-row"][data-name="soon"]');
      await soon.getByRole('button', { name: 'Move soon before later' }).click();
      await page.getByText('Move sandbox/soon: done.').waitFor();
      const [ps, pl] = [await position('soon'), await position('later')];
      assert(ps < pl, `soon (${ps}) now queues before later (${pl})`);
      await soon.getByRole('button', { name: 'Move soon after later' }).waitFor();
    });

    await step('a member sees their own workspaces and role; a viewer only reads', async () => {
      const issued = await api(egsd, 'POST', '/apis/egs.dev/v1alpha1/tokens', { spec: { user: 'carol', role: 'member', workspaces: ['vision'], ttl: '1h' } });
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByLabel('API token').fill(issued.status.token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      const text = await page.getByTestId('who').innerText();
      assert(/carol/.test(text) && /member/.test(text), `member header: ${text}`);
      assert((await page.getByRole('link', { name: 'Queue (admin)' }).count()) === 0, 'no admin queue for members');
      await page.getByRole('link', { name: 'Workspaces' }).click();
      await page.getByRole('heading', { name: 'vision' }).waitFor();
      assert((await page.locator('article.card').count()) === 1, 'only the member workspace');
      // A viewer reads everything and is offered no way to change anything.
      const viewer = await api(egsd, 'POST', '/apis/egs.dev/v1alpha1/tokens', { spec: { user: 'vic', role: 'viewer', ttl: '1h' } });
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByLabel('API token').fill(viewer.status.token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      assert(/vic/.test(await page.getByTestId('who').innerText()), 'viewer signed in');
      await card('big-one').waitFor();
      assert((await page.getByRole('link', { name: 'New request' }).count()) === 0, 'no new request for viewers');
      assert((await page.getByRole('button', { name: /Release|Delete|Edit|Extend/ }).count()) === 0, 'no write buttons for viewers');
    });

    await step('no console errors', async () => {
      log(`axe-core found no accessibility violations on: ${a11yChecked.join(', ')}`);
      assert(consoleErrors.length === 0, consoleErrors.join('\n'));
    });
  } catch {
    // Reported by step(); fall through to cleanup.
  } finally {
    await context.close().catch(() => {});
    egsd.proc.kill('SIGTERM');
    await new Promise((ok) => {
      egsd.proc.once('exit', ok);
      setTimeout(ok, 5000);
    });
    if (failed) log(`egsd output:\n${egsd.output()}`);
    if (consoleErrors.length) log(`console errors:\n${consoleErrors.join('\n')}`);
    rmSync(dir, { recursive: true, force: true });
  }
  log(`screenshots in ${OUT}`);
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed || consoleErrors.length ? 1 : 0);
}

main().catch((e) => {
  console.error(e);
  console.log(`${passed} passed, ${failed + 1} failed`);
  process.exit(1);
});

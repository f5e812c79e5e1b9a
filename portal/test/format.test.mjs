// Unit tests of the portal's pure helpers (node's test runner; no browser, no server).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { clock, duration, money, noteServerTime, parseDuration, relative, serverNow } from '../src/format.js';
import { myWorkspaces, policyInWords } from '../src/views/workspaces.js';
import { editSpec, orderRequests } from '../src/views/requests.js';
import { extraCauses } from '../src/components.js';
import { freeFrom } from '../src/views/inventory.js';

test('duration prints Go-style spans', () => {
  assert.equal(duration(0), '0s');
  assert.equal(duration(45), '45s');
  assert.equal(duration(5400), '1h30m');
  assert.equal(duration(93600), '1d2h');
  assert.equal(duration(-5), '0s');
  assert.equal(duration(null), '–');
});

test('parseDuration reads what the API writes and refuses the rest', () => {
  assert.equal(parseDuration('90m'), 5400);
  assert.equal(parseDuration('1h30m'), 5400);
  assert.equal(parseDuration('45s'), 45);
  assert.equal(parseDuration('2h'), 7200);
  assert.equal(parseDuration(''), null);
  assert.equal(parseDuration('2 hours'), null);
  assert.equal(parseDuration('h'), null);
});

test('clock and relative times are UTC and signed', () => {
  const now = Date.parse('2026-11-23T12:00:00Z');
  assert.equal(clock(Date.parse('2026-11-23T14:05:00Z'), now), '14:05 UTC');
  assert.equal(clock(Date.parse('2026-11-24T01:00:00Z'), now), 'Nov 24 01:00 UTC');
  assert.equal(relative(now + 720e3, now), 'in 12m');
  assert.equal(relative(now - 180e3, now), '3m ago');
  assert.equal(relative(now + 10e3, now), 'now');
  assert.equal(money(46.4), '$46.40');
  assert.equal(money(undefined), '–');
});

test('policyInWords says the limits a user runs into', () => {
  const words = policyInWords({
    gpuQuota: 48, allowedShapes: ['8xa100-40gb'], maxNodesPerRequest: 4, maxDuration: '24h',
    maxActiveRequests: 1, minPriority: 0, maxPriority: 500, idleTimeout: '1h', preemptible: false,
  }).join(' ');
  assert.match(words, /Up to 48 GPUs in use at once\./);
  assert.match(words, /Shapes: 8xa100-40gb; clusters: any\./);
  assert.match(words, /at most 4 nodes for at most 1d|at most 4 nodes for at most 24h/);
  assert.match(words, /1 request may run at once\./);
  assert.match(words, /Priority from 0 to 500/);
  assert.match(words, /GPUs idle for 1h are released\./);
  assert.match(words, /never preempted/);
  assert.match(policyInWords({ preemptible: true, mayBurst: true }).join(' '), /may be preempted.*burst/);
});

test('policyInWords: a GPU quota of 0 allows no GPUs; no quota is no limit', () => {
  assert.equal(policyInWords({ gpuQuota: 0 })[0], 'GPU quota 0: no GPUs may be in use.');
  assert.equal(policyInWords({ gpuQuota: null })[0], 'No GPU quota set.');
  assert.equal(policyInWords({})[0], 'No GPU quota set.');
  assert.equal(policyInWords({ gpuQuota: 8 })[0], 'Up to 8 GPUs in use at once.');
});

test('orderRequests: running first, then waiting by queue position, then finished; newest first', () => {
  const g = (name, phase, queuePosition, at) => ({
    metadata: { name, creationTimestamp: `2026-11-22T${at}:00Z` }, status: { phase, queuePosition },
  });
  const items = [
    g('done', 'Completed', undefined, '12:00'),
    g('q2', 'Queued', 2, '11:00'),
    g('q1', 'Queued', 1, '10:00'),
    g('pend', 'PendingApproval', 3, '09:00'),
    g('old-active', 'Active', undefined, '01:00'),
    g('releasing', 'Releasing', undefined, '03:00'),
    g('prov', 'Provisioning', undefined, '02:00'),
    g('failed', 'Failed', undefined, '08:00'),
  ];
  assert.deepEqual(items.sort(orderRequests).map((x) => x.metadata.name),
    ['releasing', 'prov', 'old-active', 'q1', 'q2', 'pend', 'done', 'failed']);
});

test('editSpec: an empty priority keeps the current one; wrong fields refuse the edit', () => {
  assert.deepEqual(editSpec('2', '4h', ''), { nodes: 2, duration: '4h' });
  assert.deepEqual(editSpec('2', ' 4h ', ' 50 '), { nodes: 2, duration: '4h', priority: 50 });
  assert.deepEqual(editSpec('1', '30m', '-5'), { nodes: 1, duration: '30m', priority: -5 });
  assert.deepEqual(editSpec('1', '30m', '0'), { nodes: 1, duration: '30m', priority: 0 });
  assert.equal(editSpec('1', '30m', '1.5'), null);
  assert.equal(editSpec('1', '30m', 'high'), null);
  assert.equal(editSpec('0', '30m', ''), null);
  assert.equal(editSpec('', '30m', ''), null);
  assert.equal(editSpec('1.5', '30m', ''), null);
  assert.equal(editSpec('1', 'soon', ''), null);
});

test('extraCauses leaves out causes that repeat the message', () => {
  const msg = 'spec.nodes: must be at least 1';
  assert.deepEqual(extraCauses({ causes: [{ field: 'spec.nodes', message: 'must be at least 1' }] }, msg), []);
  assert.deepEqual(extraCauses({ causes: [{ message: msg }] }, msg), []);
  const wrapped = 'GPUProvisionRequest.egs.dev "a" is invalid: spec.nodes: must be at least 1';
  assert.deepEqual(extraCauses({ causes: [{ field: 'spec.nodes', message: 'must be at least 1' }] }, wrapped), []);
  const other = { field: 'spec.duration', message: 'is required' };
  assert.deepEqual(extraCauses({ causes: [{ message: msg }, other] }, msg), [other]);
  assert.deepEqual(extraCauses({}, 'HTTP 500'), []);
});

test('myWorkspaces: members see theirs, project admins their projects, admins all', () => {
  const ws = [
    { metadata: { name: 'a' }, spec: { project: 'p' } },
    { metadata: { name: 'b' }, spec: { project: 'q' } },
  ];
  const names = (me) => myWorkspaces(ws, me).map((w) => w.metadata.name);
  assert.deepEqual(names({ role: 'member', workspaces: ['b'], projects: [] }), ['b']);
  assert.deepEqual(names({ role: 'project-admin', workspaces: [], projects: ['p'] }), ['a']);
  assert.deepEqual(names({ role: 'admin', workspaces: [], projects: [] }), ['a', 'b']);
});

test('serverNow follows the clock of egsd\'s answers, which may run ahead of the browser\'s', () => {
  const received = Date.now();
  noteServerTime(new Date(received + 5 * 3600e3).toISOString(), received);
  const ahead = serverNow() - Date.now();
  assert.ok(ahead > 5 * 3600e3 - 1000 && ahead <= 5 * 3600e3 + 1000, `ahead by ${ahead} ms`);
  assert.equal(relative(received + 5 * 3600e3 - 7200e3), '2h ago');
  noteServerTime('not a time');  // ignored
  assert.ok(serverNow() - Date.now() > 5 * 3600e3 - 1000);
  noteServerTime(new Date().toISOString());
  assert.ok(Math.abs(serverNow() - Date.now()) < 1000);
});

test('freeFrom counts a maintenance window like a booking', () => {
  const t0 = Date.parse('2026-11-29T12:00:00Z');
  const node = {
    status: {
      health: 'Healthy',
      schedule: [{ start: '2026-11-29T14:00:00Z', end: '2026-11-29T15:00:00Z' }],
      maintenance: [{ start: '2026-11-29T11:59:00Z', end: '2026-11-29T14:00:00Z' }],
    },
  };
  assert.equal(freeFrom(node, t0), Date.parse('2026-11-29T15:00:00Z'));
  assert.equal(freeFrom({ status: { health: 'Healthy' } }, t0), t0);
  assert.equal(freeFrom({ status: { health: 'Unhealthy' } }, t0), null);
});

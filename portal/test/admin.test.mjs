// Unit tests of the admin and GPU pages' pure helpers (node's test runner; no browser).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { alertParts, allocation, parseMetrics, queueByShape } from '../src/views/dashboard.js';
import { ledger, summary } from '../src/views/ledger.js';
import { orderGpus } from '../src/views/gpus.js';
import { policyPatch } from '../src/views/policies.js';
import { tickStep } from '../src/views/schedule.js';
import { impactLines } from '../src/views/queue.js';
import { applyNodeEvent } from '../src/views/fleet.js';

const H = 3600e3;

test('allocation sums GPU-hours per hour, plans apart', () => {
  const from = 0;
  const rows = [
    // 8 GPUs from 0:30 to 2:00 (ran), 4 planned from 2:00 to 3:00.
    { gpus: 8, bars: Float64Array.from([0.5 * H, 2 * H, 0, 8, 2 * H, 3 * H, 2, 4]) },
    { gpus: 8, bars: new Float64Array(0) },
  ];
  const a = allocation(rows, from, 4 * H);
  assert.equal(a.total, 16);
  assert.deepEqual([...a.used], [4, 8, 0, 0]);
  assert.deepEqual([...a.planned], [0, 0, 4, 0]);
});

test('queueByShape counts waiting requests and their GPU-hours per shape', () => {
  const g = (phase, shape, nodes, duration) => ({ spec: { shape, nodes, duration }, status: { phase } });
  const rows = queueByShape(
    [g('Queued', 'a', 2, '2h'), g('PendingApproval', 'a', 1, '30m'), g('Active', 'a', 9, '9h'), g('Queued', 'b', 1, '1h')],
    { a: 8, b: 4 },
  );
  assert.deepEqual(rows, [
    { shape: 'a', requests: 2, pending: 1, gpuHours: 36 },
    { shape: 'b', requests: 1, pending: 0, gpuHours: 4 },
  ]);
});

test('parseMetrics reads the named samples with their labels', () => {
  const text = '# HELP x\nx{workspace="w",shape="s"} 0.5\ny 3\nx 1\n';
  assert.deepEqual(parseMetrics(text, ['x']), [
    { name: 'x', labels: { workspace: 'w', shape: 's' }, value: 0.5 },
    { name: 'x', labels: {}, value: 1 },
  ]);
});

test('the ledger sets promises against actual starts', () => {
  const t = (m) => new Date(Date.UTC(2026, 0, 1, 0, m)).toISOString();
  const g = (name, status) => ({ metadata: { namespace: 'w', name }, status });
  const lines = ledger([
    g('on-time', { phase: 'Active', promisedStartP50: t(0), promisedStartP90: t(30), startTime: t(5) }),
    g('late', { phase: 'Completed', promisedStartP50: t(0), promisedStartP90: t(30), startTime: t(40) }),
    g('by-p90', { phase: 'Active', promisedStartP50: t(0), promisedStartP90: t(30), startTime: t(20) }),
    g('waiting', { phase: 'Queued', promisedStart: t(0), plannedStart: t(15) }),
    g('no-promise', { phase: 'Queued' }),
  ]);
  assert.equal(lines.length, 4);
  const by = Object.fromEntries(lines.map((l) => [l.name, l]));
  assert.equal(by['on-time'].within, true);
  assert.equal(by.late.within, false);
  assert.equal(by.late.byP90, false);
  assert.equal(by['by-p90'].byP90, true);
  assert.equal(by.waiting.within, null);
  assert.equal(by.waiting.slip, 15 * 60e3);
  const s = summary(lines);
  assert.equal(s.started, 3);
  assert.equal(s.within, 1 / 3);
  assert.equal(s.p90, 2 / 3);
});

test('orderGpus puts hot GPUs first, then by power (or temperature)', () => {
  const g = (node, powerW, temperatureC) => ({ node, gpu: 0, powerW, temperatureC });
  const list = [g('a', 300, 60), g('b', 200, 85), g('c', 400, 70), g('d', 100, 90)];
  assert.deepEqual(orderGpus(list).map((x) => x.node), ['b', 'd', 'c', 'a']);
  assert.deepEqual(orderGpus(list, 'temperature').map((x) => x.node), ['d', 'b', 'c', 'a']);
});

test('policyPatch sends only what changed and names a bad field', () => {
  const policy = { gpuQuota: 48, maxDuration: '24h', preemptible: false };
  const form = { gpuQuota: '64', maxNodesPerRequest: '', maxActiveRequests: '', maxDuration: '24h', minPriority: '', maxPriority: '', idleTimeout: '', preemptible: true, mayBurst: false };
  assert.deepEqual(policyPatch(policy, form), { patch: { gpuQuota: 64, preemptible: true } });
  assert.deepEqual(policyPatch(policy, { ...form, maxDuration: 'soon' }), { error: 'Max duration: a duration such as 30m or 24h' });
  assert.deepEqual(policyPatch(policy, { ...form, gpuQuota: '6.5' }), { error: 'GPU quota: a whole number' });
});

test('tickStep keeps axis ticks at least 80 px apart at round hours', () => {
  assert.equal(tickStep(128), H);
  assert.equal(tickStep(8), 12 * H);
  assert.equal(tickStep(1), 96 * H);
});

test('impactLines lists who moves by how much, and who loses its plan', () => {
  const now = Date.parse('2026-11-22T10:00:00Z');
  const lines = impactLines({
    start: '2026-11-22T10:00:00Z',
    shifts: [
      { namespace: 'vision', name: 'later', before: '2026-11-22T12:00:00Z', after: '2026-11-22T14:30:00Z' },
      { namespace: 'sandbox', name: 'early', before: '2026-11-22T13:00:00Z', after: '2026-11-22T12:00:00Z' },
      { namespace: 'sandbox', name: 'gone', before: '2026-11-22T13:00:00Z' },
    ],
  }, now);
  assert.equal(lines.length, 3);
  assert.match(lines[0], /^vision\/later: .* → .* \(\+2h30m\)$/);
  assert.match(lines[1], /^sandbox\/early: .*\(−1h\)$/);
  assert.match(lines[2], /^sandbox\/gone: .* → loses its plan$/);
  assert.deepEqual(impactLines({ shifts: [] }, now), []);
  // A shift under a second (the whatif answer's shiftSeconds) is no move.
  const tiny = impactLines({
    shifts: [
      { namespace: 'vision', name: 'same', before: '2026-11-22T12:00:00Z', after: '2026-11-22T12:00:00Z', shiftSeconds: 0.007884 },
      { namespace: 'vision', name: 'later', before: '2026-11-22T12:00:00Z', after: '2026-11-22T12:30:00Z', shiftSeconds: 1800 },
    ],
  }, now);
  assert.equal(tiny.length, 1);
  assert.match(tiny[0], /^vision\/later: .*\(\+30m\)$/);
});

test('alertParts reads the alerts API items', () => {
  const now = Date.parse('2026-11-22T10:00:00Z');
  const firing = alertParts({
    id: 7, rule: 'temperature', state: 'firing', severity: 'critical', node: 'n1', gpu: 3, value: 91,
    activeSince: '2026-11-22T09:50:00Z', raisedAt: '2026-11-22T09:55:00Z', workspace: 'vision', gpr: 'train',
    message: 'temperature (GPU 3 on node n1): temperature 91.0 C above 85 C for 5m',
  }, now);
  assert.equal(firing.firing, true);
  assert.equal(firing.label, 'critical');
  assert.equal(firing.text, 'temperature (GPU 3 on node n1): temperature 91.0 C above 85 C for 5m (held by vision/train)');
  assert.match(firing.time, /^since 09:50 UTC \(10m ago\)$/);
  const resolved = alertParts({
    id: 8, rule: 'notReporting', state: 'resolved', severity: 'warning', node: 'n2', value: 0,
    activeSince: '2026-11-22T09:00:00Z', raisedAt: '2026-11-22T09:05:00Z', clearedAt: '2026-11-22T09:30:00Z',
    message: 'notReporting (node n2) resolved: reporting again',
  }, now);
  assert.equal(resolved.firing, false);
  assert.equal(resolved.label, 'resolved');
  assert.equal(resolved.text, 'notReporting (node n2) resolved: reporting again');
  assert.match(resolved.time, /^cleared 09:30 UTC/);
});

test('applyNodeEvent merges watch events and keeps read-time fields', () => {
  const nodes = new Map();
  const node = (name, status) => ({ kind: 'Node', metadata: { name }, spec: { cluster: 'c', shape: 's' }, status });
  nodes.set('a', node('a', { health: 'Healthy', freeGpusNow: 8, schedule: [{ request: 'x' }] }));
  assert.equal(applyNodeEvent(nodes, { type: 'MODIFIED', object: node('a', { health: 'Cordoned' }) }), true);
  assert.deepEqual(nodes.get('a').status, { health: 'Cordoned', freeGpusNow: 8, schedule: [{ request: 'x' }] });
  // Fields the event does carry win.
  applyNodeEvent(nodes, { type: 'MODIFIED', object: node('a', { health: 'Healthy', freeGpusNow: 0 }) });
  assert.equal(nodes.get('a').status.freeGpusNow, 0);
  assert.equal(applyNodeEvent(nodes, { type: 'ADDED', object: node('b', {}) }), true);
  assert.equal(nodes.size, 2);
  assert.equal(applyNodeEvent(nodes, { type: 'BOOKMARK', object: { metadata: { resourceVersion: '9' } } }), false);
  assert.equal(applyNodeEvent(nodes, { type: 'DELETED', object: node('b') }), true);
  assert.deepEqual([...nodes.keys()], ['a']);
});

test('kubeconfig downloads: an admin for any member, a member for itself only', async () => {
  const { kubeconfigMembers } = await import('../src/views/workspaces.js');
  const w = { metadata: { name: 'vision' }, spec: { members: [{ user: 'carol' }, { user: 'dan' }] } };
  const me = (role, user, workspaces = []) => ({ role, user, workspaces });
  assert.deepEqual(kubeconfigMembers(w, me('admin', 'root')), ['carol', 'dan']);
  assert.deepEqual(kubeconfigMembers(w, me('member', 'carol', ['vision'])), ['carol']);
  assert.deepEqual(kubeconfigMembers(w, me('member', 'erin', ['vision'])), []); // token, not listed
  assert.deepEqual(kubeconfigMembers(w, me('member', 'carol', ['other'])), []);
  assert.deepEqual(kubeconfigMembers(w, me('viewer', 'vic')), []);
  assert.deepEqual(kubeconfigMembers({ metadata: { name: 'x' }, spec: {} }, me('admin', 'root')), []);
});

test('saveText hands the text to the browser as a named download', async () => {
  const { saveText } = await import('../src/views/workspaces.js');
  const clicked = [];
  const body = { children: [], appendChild(a) { this.children.push(a); } };
  const doc = {
    body,
    createElement: () => ({
      click() { clicked.push({ href: this.href, download: this.download }); },
      remove() { body.children = body.children.filter((c) => c !== this); },
    }),
  };
  saveText('vision-carol.kubeconfig', 'apiVersion: v1\n', doc);
  assert.equal(clicked.length, 1);
  assert.equal(clicked[0].download, 'vision-carol.kubeconfig');
  assert.match(clicked[0].href, /^blob:/);
  assert.equal(body.children.length, 0);
});

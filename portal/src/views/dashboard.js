// Admin dashboard: fleet allocation over time (from the schedule: what ran, runs and is planned,
// a day back to a week ahead), the queue per shape (requests and waiting GPU-hours), alerts
// (the alerts API's, when the server has one, above the latest warning events) and promise
// accuracy (the egs_scheduler_promise_* gauges of /metrics).
import { useEffect, useState } from 'preact/hooks';

import { html } from '../html.js';
import { API } from '../api.js';
import { ErrorBox, usePoll, useNow } from '../components.js';
import { clock, parseDuration, serverNow, when } from '../format.js';
import { loadSchedule } from './schedule.js';
import { lastTime } from './events.js';

const HOUR = 3600e3;

// GPUs allocated (ran or reserved) and planned per hour over [from, to), and the fleet's GPUs.
export function allocation(rows, from, to) {
  const n = Math.ceil((to - from) / HOUR);
  const used = new Float64Array(n);
  const planned = new Float64Array(n);
  let total = 0;
  for (const r of rows) {
    total += r.gpus;
    for (let k = 0; k < r.bars.length; k += 4) {
      const s = Math.max(from, r.bars[k]);
      const e = Math.min(to, r.bars[k + 1]);
      const into = r.bars[k + 2] === 2 ? planned : used;
      // GPU-hours of the booking in each hour bucket it touches, as an average over the hour.
      for (let b = Math.floor((s - from) / HOUR); b < n && from + b * HOUR < e; b++) {
        const bs = Math.max(s, from + b * HOUR);
        const be = Math.min(e, from + (b + 1) * HOUR);
        if (be > bs) into[b] += (r.bars[k + 3] * (be - bs)) / HOUR;
      }
    }
  }
  return { used, planned, total, from, n };
}

// Queued and pending requests per shape: count and GPU-hours asked.
export function queueByShape(gprs, shapes) {
  const per = new Map();
  for (const g of gprs) {
    const s = g.status || {};
    if (s.phase !== 'Queued' && s.phase !== 'PendingApproval') continue;
    const shape = s.plannedShape || g.spec.shape || (g.spec.shapes || [])[0] || '?';
    const gpn = g.spec.gpusPerNode || (shapes[shape] || 0);
    const hours = (parseDuration(g.spec.duration) || 0) / 3600;
    const row = per.get(shape) || { shape, requests: 0, pending: 0, gpuHours: 0 };
    row.requests += 1;
    if (s.phase === 'PendingApproval') row.pending += 1;
    row.gpuHours += g.spec.nodes * gpn * hours;
    per.set(shape, row);
  }
  return [...per.values()].sort((a, b) => b.gpuHours - a.gpuHours);
}

// Prometheus text: the samples of `names` as {name, labels, value}.
export function parseMetrics(text, names) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)/);
    if (!m || !names.includes(m[1])) continue;
    const labels = {};
    for (const [, k, v] of (m[3] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[k] = v;
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

// One alert of the alerts API ({id, rule, state, severity, node, gpu?, workspace?, gpr?,
// activeSince, clearedAt?, message, ...}; the message names the rule, GPU and node) for the list.
export function alertParts(a, now) {
  const firing = a.state === 'firing';
  const holder = a.workspace ? ` (held by ${a.workspace}${a.gpr ? `/${a.gpr}` : ''})` : '';
  return {
    firing,
    label: firing ? a.severity || 'firing' : 'resolved',
    text: `${a.message || `${a.rule} on ${a.node}`}${holder}`,
    time: firing ? `since ${when(a.activeSince, now)}` : a.clearedAt ? `cleared ${when(a.clearedAt, now)}` : '',
  };
}

function AllocationChart({ a, now }) {
  const W = 720;
  const H = 160;
  const max = Math.max(1, a.total);
  const x = (i) => (i / a.n) * W;
  const y = (v) => H - (v / max) * H;
  const line = (arr, add) => Array.from(arr, (v, i) => `${x(i).toFixed(1)},${y(v + (add ? add[i] : 0)).toFixed(1)}`).join(' ');
  const nowX = ((now - a.from) / HOUR / a.n) * W;
  const peak = Math.max(...a.used);
  const current = a.used[Math.min(a.n - 1, Math.max(0, Math.floor((now - a.from) / HOUR)))] || 0;
  return html`<figure class="chart">
    <svg viewBox=${`0 0 ${W} ${H + 16}`} role="img" aria-label=${`Fleet allocation: ${Math.round((100 * current) / max)}% of ${a.total} GPUs now, peak ${Math.round((100 * peak) / max)}%`}>
      <rect x="0" y="0" width=${W} height=${H} fill="#f6f8fa" />
      <polyline points=${line(a.used, a.planned)} fill="none" stroke="#0a58ca" stroke-width="1.5" stroke-dasharray="4 2" />
      <polyline points=${line(a.used)} fill="none" stroke="#1a7f37" stroke-width="2" />
      <line x1=${nowX} x2=${nowX} y1="0" y2=${H} stroke="#cf222e" />
      <text x="2" y=${H + 12} font-size="10">${clock(a.from)}</text>
      <text x=${W - 2} y=${H + 12} font-size="10" text-anchor="end">${clock(a.from + a.n * HOUR)}</text>
    </svg>
    <figcaption class="muted">GPUs in use (green) and with plans added (blue, dashed) per hour, of ${a.total}; red: now.
      Now ${Math.round(current)} GPUs (${Math.round((100 * current) / max)}%).</figcaption>
  </figure>`;
}

export function Dashboard({ session }) {
  const { api } = session;
  const now = useNow(30000);
  const [alloc, setAlloc] = useState(null);
  const [allocError, setAllocError] = useState(null);
  useEffect(() => {
    const from = Math.floor((serverNow() - 24 * HOUR) / HOUR) * HOUR;
    const to = from + 8 * 24 * HOUR;
    loadSchedule(api, { from, to })
      .then((rows) => setAlloc(allocation(rows, from, to)))
      .catch(setAllocError);
  }, []);
  const { data, error } = usePoll(async () => {
    // The alerts API is served beside the Kubernetes-style resources, not listed in discovery
    // (kubectl could not print its items): asked directly, and a server without it (404) or a
    // token that may not read it (403) falls back to the warning events.
    const [gprs, shapes, events, alerts, metrics] = await Promise.all([
      api.get(`${API}/gpuprovisionrequests`),
      api.get(`${API}/gpushapes`),
      api.get(`${API}/events`),
      api.get(`${API}/alerts`).then(
        (r) => (r && Array.isArray(r.items) ? r.items : null),
        (e) => {
          if (e && (e.status === 404 || e.status === 403)) return null;
          throw e;
        },
      ),
      fetch('/metrics').then((r) => (r.ok ? r.text() : '')),
    ]);
    const gpn = Object.fromEntries((shapes.items || []).map((s) => [s.metadata.name, s.spec.gpusPerNode]));
    return {
      queue: queueByShape(gprs.items || [], gpn),
      warnings: (events.items || []).filter((e) => e.type === 'Warning').sort((a, b) => lastTime(b) - lastTime(a)),
      alerts,
      promises: parseMetrics(metrics, ['egs_scheduler_promise_started', 'egs_scheduler_promise_within_10m_ratio', 'egs_scheduler_promise_p90_coverage_ratio']),
    };
  }, 10000);
  return html`<section aria-labelledby="dash-h">
    <h1 id="dash-h">Dashboard</h1>
    <${ErrorBox} error=${error || allocError} />
    <div class="dash">
      <article class="card wide" aria-labelledby="d-alloc">
        <h2 id="d-alloc">Fleet allocation</h2>
        ${alloc ? html`<${AllocationChart} a=${alloc} now=${now} />` : html`<p role="status">Loading…</p>`}
      </article>
      <article class="card" aria-labelledby="d-queue">
        <h2 id="d-queue">Queue per shape</h2>
        ${data == null ? html`<p role="status">Loading…</p>` : data.queue.length === 0 ? html`<p>Nothing waits.</p>` : html`
          <table class="grid" data-testid="queue-by-shape">
            <thead><tr><th scope="col">Shape</th><th scope="col">Waiting</th><th scope="col">Of which need approval</th><th scope="col">GPU-hours</th></tr></thead>
            <tbody>${data.queue.map((q) => html`<tr><th scope="row">${q.shape}</th><td class="num">${q.requests}</td><td class="num">${q.pending}</td><td class="num">${q.gpuHours.toFixed(0)}</td></tr>`)}</tbody>
          </table>`}
      </article>
      <article class="card" aria-labelledby="d-alerts">
        <h2 id="d-alerts">${data && data.alerts ? 'Alerts' : 'Alerts (warning events)'}</h2>
        ${data == null ? html`<p role="status">Loading…</p>` : html`
          ${data.alerts ? html`${data.alerts.length === 0 ? html`<p>No alerts.</p>` : html`
            <ul class="plain" data-testid="dash-alert-list">${data.alerts.slice(0, 10).map((a) => {
              const p = alertParts(a, now);
              return html`<li key=${a.id} class=${p.firing ? '' : 'muted'}><strong>${p.label}</strong> ${p.text} <span class="muted">${p.time}</span></li>`;
            })}</ul>`}
            <h3>Warning events</h3>` : ''}
          ${data.warnings.length === 0 ? html`<p>No warnings.</p>` : html`
            <ul class="plain" data-testid="dash-alerts">${data.warnings.slice(0, 8).map((e) => html`<li><strong>${e.reason}</strong> ${(e.involvedObject || {}).name}: ${e.message} <span class="muted">${when(e.lastTimestamp || e.firstTimestamp, now)}</span></li>`)}</ul>
            <a href="#/events">All events</a>`}`}
      </article>
      <article class="card" aria-labelledby="d-prom">
        <h2 id="d-prom">Promise accuracy</h2>
        ${data == null ? html`<p role="status">Loading…</p>` : html`<${PromiseTable} samples=${data.promises} />`}
      </article>
    </div>
  </section>`;
}

// The /metrics promise gauges by (workspace, shape).
export function PromiseTable({ samples }) {
  const rows = new Map();
  for (const s of samples) {
    const key = `${s.labels.workspace || ''}\u0000${s.labels.shape || ''}`;
    const r = rows.get(key) || { workspace: s.labels.workspace || 'all', shape: s.labels.shape || 'all' };
    r[s.name] = s.value;
    rows.set(key, r);
  }
  const list = [...rows.values()];
  if (!list.length) return html`<p>No request with a promise has started yet.</p>`;
  const pct = (v) => (v == null || Number.isNaN(v) ? '–' : `${Math.round(v * 100)}%`);
  return html`<table class="grid" data-testid="promise-accuracy">
    <thead><tr><th scope="col">Workspace</th><th scope="col">Shape</th><th scope="col">Started</th><th scope="col">Within ±10 min of P50</th><th scope="col">By P90</th></tr></thead>
    <tbody>${list.map((r) => html`<tr><td>${r.workspace}</td><td>${r.shape}</td><td class="num">${r.egs_scheduler_promise_started ?? 0}</td>
      <td class="num">${pct(r.egs_scheduler_promise_within_10m_ratio)}</td><td class="num">${pct(r.egs_scheduler_promise_p90_coverage_ratio)}</td></tr>`)}</tbody>
  </table>`;
}

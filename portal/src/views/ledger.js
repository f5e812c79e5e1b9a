// Admin: the promise ledger. Every request got a promise at submit (planned start, and the
// calibrated P50/P90); this page sets each against what happened (its actual start) or what is
// planned now, and sums it up as the product promises it: the share of started requests that
// started within ±10 min of the P50, and the share that started by the P90 (also per workspace
// and shape from /metrics).
import { useState } from 'preact/hooks';

import { html } from '../html.js';
import { API } from '../api.js';
import { ErrorBox, usePoll, useNow } from '../components.js';
import { duration, parseTime, when } from '../format.js';
import { PromiseTable, parseMetrics } from './dashboard.js';

const TEN_MIN = 600e3;

// One ledger line per request with a promise: {ns, name, phase, p50, p90, actual, planned, slip, within, byP90}.
export function ledger(gprs) {
  const out = [];
  for (const g of gprs) {
    const s = g.status || {};
    const p50 = parseTime(s.promisedStartP50 || s.promisedStart);
    if (p50 == null) continue;
    const p90 = parseTime(s.promisedStartP90);
    const actual = parseTime(s.startTime);
    const planned = parseTime(s.plannedStart);
    const at = actual ?? planned;
    const slip = at == null ? null : at - p50;
    out.push({
      ns: g.metadata.namespace, name: g.metadata.name, phase: s.phase, p50, p90, actual, planned, slip,
      within: actual != null ? Math.abs(actual - p50) <= TEN_MIN : null,
      byP90: actual != null && p90 != null ? actual <= p90 : null,
    });
  }
  return out.sort((a, b) => (b.actual ?? b.p50) - (a.actual ?? a.p50));
}

export function summary(lines) {
  const started = lines.filter((l) => l.actual != null);
  const withP90 = started.filter((l) => l.byP90 != null);
  return {
    started: started.length,
    within: started.length ? started.filter((l) => l.within).length / started.length : null,
    p90: withP90.length ? withP90.filter((l) => l.byP90).length / withP90.length : null,
  };
}

export function Ledger({ session }) {
  const { api } = session;
  const now = useNow(10000);
  const [only, setOnly] = useState('');
  const { data, error } = usePoll(async () => {
    const [gprs, metrics] = await Promise.all([
      api.get(`${API}/gpuprovisionrequests`),
      fetch('/metrics').then((r) => (r.ok ? r.text() : '')),
    ]);
    return {
      lines: ledger(gprs.items || []),
      promises: parseMetrics(metrics, ['egs_scheduler_promise_started', 'egs_scheduler_promise_within_10m_ratio', 'egs_scheduler_promise_p90_coverage_ratio']),
    };
  }, 10000);
  const lines = data ? data.lines.filter((l) => !only || (only === 'late' ? l.slip > TEN_MIN : only === 'started' ? l.actual != null : l.actual == null)) : null;
  const sum = data ? summary(data.lines) : null;
  const pct = (v) => (v == null ? '–' : `${Math.round(v * 100)}%`);
  return html`<section aria-labelledby="led-h">
    <h1 id="led-h">Promise ledger</h1>
    <${ErrorBox} error=${error} />
    ${data == null ? html`<p role="status">Loading…</p>` : html`
      <p data-testid="ledger-summary"><strong>${sum.started}</strong> started request${sum.started === 1 ? '' : 's'} with a promise:
        <strong>${pct(sum.within)}</strong> started within ±10 min of the promised P50, <strong>${pct(sum.p90)}</strong> by the P90.</p>
      <h2>By workspace and shape</h2>
      <${PromiseTable} samples=${data.promises} />
      <h2>Requests</h2>
      <div class="toolbar">
        <label for="led-only">Show</label>
        <select id="led-only" value=${only} onChange=${(e) => setOnly(e.currentTarget.value)}>
          <option value="">all</option><option value="started">started</option><option value="waiting">not started</option>
          <option value="late">later than promised by 10 min or more</option>
        </select>
        <span class="muted" role="status">${lines.length} request${lines.length === 1 ? '' : 's'}${lines.length > 300 ? ', 300 shown' : ''}</span>
      </div>
      <table class="grid" data-testid="ledger">
        <thead><tr><th scope="col">Request</th><th scope="col">Phase</th><th scope="col">Promised (P50)</th><th scope="col">P90</th>
          <th scope="col">Started / planned</th><th scope="col">Against P50</th><th scope="col">Kept</th></tr></thead>
        <tbody>${lines.slice(0, 300).map((l) => html`<tr data-testid="ledger-row" data-name=${l.name}>
          <th scope="row">${l.ns}/${l.name}</th><td>${l.phase}</td><td>${when(new Date(l.p50).toISOString(), now)}</td>
          <td>${l.p90 != null ? when(new Date(l.p90).toISOString(), now) : '–'}</td>
          <td>${l.actual != null ? `started ${when(new Date(l.actual).toISOString(), now)}` : l.planned != null ? `planned ${when(new Date(l.planned).toISOString(), now)}` : '–'}</td>
          <td class=${l.slip > TEN_MIN ? 'late' : ''}>${l.slip == null ? '–' : Math.abs(l.slip) < 60e3 ? 'on time' : l.slip > 0 ? `${duration(l.slip / 1000)} later` : `${duration(-l.slip / 1000)} earlier`}</td>
          <td>${l.actual == null ? 'pending' : l.within ? 'yes' : l.byP90 ? 'by P90' : 'no'}</td>
        </tr>`)}</tbody>
      </table>`}
  </section>`;
}

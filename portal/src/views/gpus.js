// GPUs of my workloads: every GPU held by a request (of my workspaces, for members) with its
// latest power, temperature and utilization (GET /telemetry/hotspots), hot spots first; filters;
// a small SVG time series per GPU (GET /nodes/{node}/telemetry?gpu=N); and a summary per
// running request (GET .../gpuprovisionrequests/{name}/telemetry).
import { useState } from 'preact/hooks';

import { html } from '../html.js';
import { API, gprPath } from '../api.js';
import { ErrorBox, usePoll } from '../components.js';
import { clock } from '../format.js';

export const HOT_C = 80;

// Hot GPUs (at or above HOT_C) first, then by power, then by temperature.
export function orderGpus(list, by = 'power') {
  const key = by === 'temperature' ? ['temperatureC', 'powerW'] : ['powerW', 'temperatureC'];
  return [...list].sort((a, b) => {
    const ha = a.temperatureC >= HOT_C;
    const hb = b.temperatureC >= HOT_C;
    if (ha !== hb) return ha ? -1 : 1;
    return b[key[0]] - a[key[0]] || b[key[1]] - a[key[1]] || a.node.localeCompare(b.node) || a.gpu - b.gpu;
  });
}

export function Gpus({ session }) {
  const { api, me } = session;
  const [ws, setWs] = useState('');
  const [gpr, setGpr] = useState('');
  const [model, setModel] = useState('');
  const [by, setBy] = useState('power');
  const [picked, setPicked] = useState(null);
  const { data, error } = usePoll(async () => {
    const hot = await api.get(`${API}/telemetry/hotspots?by=power&limit=1000`);
    let items = (hot.items || []).filter((g) => g.gpr);
    if (me.role === 'member') items = items.filter((g) => me.workspaces.includes(g.workspace));
    const running = [...new Set(items.map((g) => `${g.workspace}/${g.gpr}`))];
    const summaries = await Promise.all(running.slice(0, 20).map(async (key) => {
      const [ns, name] = key.split('/');
      try {
        return { ns, name, ...(await api.get(`${gprPath(ns, name)}/telemetry?since=1h`)) };
      } catch (e) {
        return { ns, name, error: e.message };
      }
    }));
    return { items, summaries };
  }, 15000);
  const items = data ? data.items : [];
  const spaces = [...new Set(items.map((g) => g.workspace))].sort();
  const requests = [...new Set(items.filter((g) => !ws || g.workspace === ws).map((g) => g.gpr))].sort();
  const models = [...new Set(items.map((g) => g.model))].sort();
  const shown = orderGpus(items.filter((g) => (!ws || g.workspace === ws) && (!gpr || g.gpr === gpr) && (!model || g.model === model)), by);
  return html`<section aria-labelledby="gpu-h">
    <h1 id="gpu-h">GPUs of my workloads</h1>
    <${ErrorBox} error=${error} />
    ${data == null ? html`<p role="status">Loading…</p>` : html`
      <h2>Per request (last hour)</h2>
      ${data.summaries.length === 0 ? html`<p>None of your requests holds GPUs now.</p>` : html`
        <table class="grid" data-testid="gpu-summary">
          <thead><tr><th scope="col">Request</th><th scope="col">GPUs</th><th scope="col">Average utilization</th>
            <th scope="col">Peak power</th><th scope="col">Hottest</th></tr></thead>
          <tbody>${data.summaries.map((s) => {
            const m = s.summary || {};
            return html`<tr><th scope="row">${s.ns}/${s.name}</th>${s.error ? html`<td colspan="4">${s.error}</td>` : html`
              <td class="num">${m.gpus ?? '–'}</td><td class="num">${fmt(m.utilAvg, '%')}</td>
              <td class="num">${fmt(m.peakPowerW, ' W')}${m.peakPowerGpu ? html` <span class="muted">(${m.peakPowerGpu.node} #${m.peakPowerGpu.gpu})</span>` : ''}</td>
              <td class="num">${fmt(m.maxTemperatureC, ' °C')}${m.hottestGpu ? html` <span class="muted">(${m.hottestGpu.node} #${m.hottestGpu.gpu})</span>` : ''}</td>`}</tr>`;
          })}</tbody>
        </table>`}
      <h2>GPUs</h2>
      <div class="toolbar">
        <label for="gpu-ws">Workspace</label>
        <select id="gpu-ws" value=${ws} onChange=${(e) => { setWs(e.currentTarget.value); setGpr(''); }}>
          <option value="">all</option>${spaces.map((s) => html`<option value=${s}>${s}</option>`)}
        </select>
        <label for="gpu-req">Request</label>
        <select id="gpu-req" value=${gpr} onChange=${(e) => setGpr(e.currentTarget.value)}>
          <option value="">all</option>${requests.map((s) => html`<option value=${s}>${s}</option>`)}
        </select>
        <label for="gpu-model">Model</label>
        <select id="gpu-model" value=${model} onChange=${(e) => setModel(e.currentTarget.value)}>
          <option value="">all</option>${models.map((s) => html`<option value=${s}>${s}</option>`)}
        </select>
        <label for="gpu-by">Sort by</label>
        <select id="gpu-by" value=${by} onChange=${(e) => setBy(e.currentTarget.value)}>
          <option value="power">power</option><option value="temperature">temperature</option>
        </select>
        <span class="muted" role="status">${shown.length} GPU${shown.length === 1 ? '' : 's'}${shown.length > 200 ? ', first 200 shown' : ''}</span>
      </div>
      ${picked ? html`<${GpuChart} api=${api} g=${picked} close=${() => setPicked(null)} />` : ''}
      <table class="grid" data-testid="gpu-table">
        <thead><tr><th scope="col">GPU</th><th scope="col">Request</th><th scope="col">Model</th><th scope="col">Power</th>
          <th scope="col">Temperature</th><th scope="col">Utilization</th><th scope="col">Read</th><th scope="col">History</th></tr></thead>
        <tbody>${shown.slice(0, 200).map((g) => html`<tr data-testid="gpu-row" data-power=${g.powerW} data-temp=${g.temperatureC} class=${g.temperatureC >= HOT_C ? 'warning' : ''}>
          <th scope="row">${g.node} #${g.gpu}</th><td>${g.workspace}/${g.gpr}</td><td>${g.model}</td>
          <td class="num">${fmt(g.powerW, ' W')}</td><td class="num">${fmt(g.temperatureC, ' °C')}${g.temperatureC >= HOT_C ? ' (hot)' : ''}</td>
          <td class="num">${fmt(g.utilization, '%')}</td><td>${clock(Date.parse(g.time))}</td>
          <td><button type="button" onClick=${() => setPicked(g)}>Chart ${g.node} #${g.gpu}</button></td>
        </tr>`)}</tbody>
      </table>`}
  </section>`;
}

function fmt(v, unit) {
  return typeof v === 'number' ? `${Math.round(v)}${unit}` : '–';
}

const SERIES = [
  ['powerAvgW', 'power (W)', '#b42318'],
  ['temperatureAvgC', 'temperature (°C)', '#9a6700'],
  ['utilAvg', 'utilization (%)', '#0a58ca'],
];

// Power, temperature and utilization of one GPU over the last hour, each scaled to its own
// range (the legend gives the ranges).
function GpuChart({ api, g, close }) {
  const { data, error } = usePoll(
    () => api.get(`${API}/nodes/${encodeURIComponent(g.node)}/telemetry?gpu=${g.gpu}&since=1h`),
    10000,
    [g.node, g.gpu],
  );
  const series = data ? (data.series || []).find((s) => s.gpu === g.gpu) || (data.series || [])[0] : null;
  const points = series ? series.points || [] : [];
  const W = 600;
  const H = 140;
  const t0 = points.length ? Date.parse(points[0].time) : 0;
  const t1 = points.length ? Date.parse(points[points.length - 1].time) : 1;
  // One reading is a dot in the middle; more are a line.
  const x = (t) => (t1 > t0 ? ((t - t0) / (t1 - t0)) * W : W / 2);
  const lines = SERIES.map(([key, label, color]) => {
    const vs = points.map((p) => p[key]).filter((v) => typeof v === 'number');
    const lo = vs.length ? Math.min(...vs) : 0;
    const hi = vs.length ? Math.max(...vs) : 0;
    const y = (v) => H - 4 - ((v - lo) / Math.max(1e-9, hi - lo)) * (H - 8);
    const xy = points.filter((p) => typeof p[key] === 'number').map((p) => [x(Date.parse(p.time)), y(p[key])]);
    const pts = xy.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(' ');
    return { key, label, color, pts, xy, lo, hi };
  });
  return html`<figure class="card chart" data-testid="gpu-chart" aria-labelledby="gpu-chart-h">
    <h3 id="gpu-chart-h">${g.node} GPU ${g.gpu} (${g.model}), last hour</h3>
    <${ErrorBox} error=${error} />
    ${data == null ? html`<p role="status">Loading…</p>` : points.length === 0 ? html`<p>No readings in the last hour.</p>` : html`
      <svg viewBox=${`0 0 ${W} ${H + 14}`} role="img" aria-label=${`GPU ${g.gpu} of ${g.node}: ${lines.map((l) => `${l.label} ${Math.round(l.lo)} to ${Math.round(l.hi)}`).join(', ')}`}>
        <rect x="0" y="0" width=${W} height=${H} fill="#f6f8fa" />
        ${lines.map((l) => (l.xy.length > 1
          ? html`<polyline points=${l.pts} fill="none" stroke=${l.color} stroke-width="1.5" />`
          : l.xy.map(([a, b]) => html`<circle cx=${a} cy=${b} r="3" fill=${l.color} />`)))}
        <text x="2" y=${H + 12} font-size="10">${clock(t0)}</text>
        <text x=${W - 2} y=${H + 12} font-size="10" text-anchor="end">${clock(t1)}</text>
      </svg>
      <figcaption class="legend">${lines.map((l) => html`<span><i style=${`background:${l.color}`}></i>${l.label} ${Math.round(l.lo)}–${Math.round(l.hi)}</span>`)}</figcaption>`}
    <button type="button" onClick=${close}>Close chart</button>
  </figure>`;
}

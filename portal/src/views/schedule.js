// Admin: the fleet schedule as a Gantt chart. Every node is a row; past runs, current
// reservations, plans of queued requests and unavailability windows are bars over two weeks
// (from 2 days back). Data: GET /schedule, paged by node (1,000 nodes a page).
//
// Rendering is virtualised: one canvas the size of the viewport draws only the rows and the
// time span in view, on the next animation frame after a scroll or zoom. A transparent scroller
// on top of it carries the scrollbars and the keyboard (arrows scroll, + and - zoom). The
// details of the bar under a click (or of the first bar of the top row with Enter) are
// announced in a status line. window.__egsGantt exposes draw timings for the browser test.
import { useEffect, useRef, useState } from 'preact/hooks';

import { html } from '../html.js';
import { API } from '../api.js';
import { ErrorBox } from '../components.js';
import { clock, duration, serverNow } from '../format.js';

const ROW_H = 16;
const AXIS_H = 28;
const LABEL_W = 150;
const HOUR = 3600e3;
const BACK_H = 48;
const AHEAD_H = 12 * 24;
export const ZOOMS = [1, 2, 4, 8, 16, 32, 64, 128]; // pixels per hour
const COLORS = { Past: '#8c959f', Reserved: '#1a7f37', Planned: '#0a58ca', unavailable: '#b42318' };
const KIND_CODE = { Past: 0, Reserved: 1, Planned: 2 };
const KINDS = ['Past', 'Reserved', 'Planned'];

const PAGE = 1000;

// One page of the schedule as compact rows:
// {node, cluster, shape, gpus, bars: Float64Array [start, end, kind, gpus]*, names: [], unavailable: []}.
async function loadPage(api, { from, to, cluster, shape }, offset) {
  const q = new URLSearchParams({ from: new Date(from).toISOString(), to: new Date(to).toISOString(), limit: String(PAGE), continue: String(offset) });
  if (cluster) q.set('cluster', cluster);
  if (shape) q.set('shape', shape);
  const page = await api.get(`${API}/schedule?${q}`);
  const rows = (page.items || []).map((it) => {
    const b = it.bookings || [];
    const bars = new Float64Array(b.length * 4);
    b.forEach((x, i) => {
      bars[i * 4] = Date.parse(x.start);
      bars[i * 4 + 1] = Date.parse(x.end);
      bars[i * 4 + 2] = KIND_CODE[x.kind] ?? 2;
      bars[i * 4 + 3] = x.gpus;
    });
    return {
      node: it.node, cluster: it.cluster, shape: it.shape, gpus: it.gpus, bars,
      names: b.map((x) => `${x.workspace}/${x.request}`),
      unavailable: (it.unavailable || []).map((u) => [Date.parse(u.start), Date.parse(u.end)]),
    };
  });
  return { rows, total: page.total || 0 };
}

// All pages of the schedule over [from, to): the first page gives the node count, the others
// (the API pages by node position) are fetched three at a time.
export async function loadSchedule(api, filters, onProgress) {
  const first = await loadPage(api, filters, 0);
  const pages = [first.rows];
  let loaded = first.rows.length;
  if (onProgress) onProgress(loaded, first.total);
  const offsets = [];
  for (let o = PAGE; o < first.total; o += PAGE) offsets.push(o);
  let next = 0;
  const worker = async () => {
    while (next < offsets.length) {
      const i = next++;
      const p = await loadPage(api, filters, offsets[i]);
      pages[i + 1] = p.rows;
      loaded += p.rows.length;
      if (onProgress) onProgress(loaded, first.total);
    }
  };
  await Promise.all([worker(), worker(), worker()]);
  return pages.flat();
}

export function Schedule({ session }) {
  const { api } = session;
  const [filters, setFilters] = useState({ cluster: '', shape: '' });
  // The rows with the window they were loaded for: {rows, from, now}.
  const [loaded, setLoaded] = useState(null);
  const rows = loaded && loaded.rows;
  const [progress, setProgress] = useState('');
  const [error, setError] = useState(null);
  const [zoom, setZoom] = useState(3); // index into ZOOMS
  const [picked, setPicked] = useState('');
  const [view, setView] = useState({ first: 0, last: 0 });
  const [find, setFind] = useState('');
  const [pools, setPools] = useState({ clusters: [], shapes: [] });
  const now = loaded ? loaded.now : serverNow();
  const from = loaded ? loaded.from : Math.floor((now - BACK_H * HOUR) / HOUR) * HOUR;
  const to = from + (BACK_H + AHEAD_H) * HOUR;
  const scroller = useRef(null);
  const canvas = useRef(null);
  const frame = useRef(0);
  const drawRef = useRef(null);

  useEffect(() => {
    Promise.all([api.get(`${API}/clusters`), api.get(`${API}/gpushapes`)])
      .then(([c, s]) => setPools({
        clusters: (c.items || []).map((x) => x.metadata.name).sort(),
        shapes: (s.items || []).map((x) => x.metadata.name).sort(),
      }))
      .catch(() => {});
  }, []);

  useEffect(() => {
    let live = true;
    setLoaded(null);
    setError(null);
    const t = serverNow();
    const f = Math.floor((t - BACK_H * HOUR) / HOUR) * HOUR;
    loadSchedule(api, { from: f, to: f + (BACK_H + AHEAD_H) * HOUR, ...filters }, (n, total) => live && setProgress(`${n} of ${total} nodes loaded`))
      .then((r) => {
        if (!live) return;
        const stats = (window.__egsGantt = window.__egsGantt || { draws: [], rows: 0 });
        stats.bookings = r.reduce((n, row) => n + row.bars.length / 4, 0);
        setLoaded({ rows: r, from: f, now: t });
      })
      .catch((e) => live && setError(e));
    return () => { live = false; };
  }, [filters.cluster, filters.shape]);

  const pxPerHour = ZOOMS[zoom];
  const pxPerMs = pxPerHour / HOUR;
  const width = (to - from) * pxPerMs;

  const draw = () => {
    frame.current = 0;
    const sc = scroller.current;
    const cv = canvas.current;
    if (!sc || !cv || !rows) return;
    const t0 = performance.now();
    const dpr = window.devicePixelRatio || 1;
    const w = sc.clientWidth;
    const h = sc.clientHeight;
    if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
      cv.width = Math.round(w * dpr);
      cv.height = Math.round(h * dpr);
      cv.style.width = `${w}px`;
      cv.style.height = `${h}px`;
    }
    const ctx = cv.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const first = Math.max(0, Math.floor(sc.scrollTop / ROW_H));
    const last = Math.min(rows.length, Math.ceil((sc.scrollTop + h - AXIS_H) / ROW_H));
    const tLeft = from + sc.scrollLeft / pxPerMs;
    const tRight = tLeft + (w - LABEL_W) / pxPerMs;
    const x = (t) => LABEL_W + (t - tLeft) * pxPerMs;
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    // Grid lines under the bars, at the axis ticks.
    const step = tickStep(pxPerHour);
    const firstTick = Math.ceil(tLeft / step) * step;
    ctx.fillStyle = '#d0d7de';
    for (let t = firstTick; t <= tRight; t += step) ctx.fillRect(x(t), AXIS_H, 1, h - AXIS_H);
    // Rows: zebra, unavailability, bars, labels.
    for (let i = first; i < last; i++) {
      const r = rows[i];
      const y = AXIS_H + i * ROW_H - sc.scrollTop;
      if (i % 2) {
        ctx.fillStyle = 'rgba(208, 215, 222, 0.25)';
        ctx.fillRect(LABEL_W, y, w - LABEL_W, ROW_H);
      }
      for (const [s, e] of r.unavailable) {
        if (e < tLeft || s > tRight) continue;
        ctx.fillStyle = 'rgba(180, 35, 24, 0.25)';
        const xs = Math.max(LABEL_W, x(s));
        ctx.fillRect(xs, y, Math.min(w, x(e)) - xs, ROW_H);
      }
      const b = r.bars;
      for (let k = 0; k < b.length; k += 4) {
        if (b[k + 1] < tLeft || b[k] > tRight) continue;
        const xs = Math.max(LABEL_W, x(b[k]));
        const xe = Math.min(w, x(b[k + 1]));
        if (xe - xs < 0.5) continue;
        const kind = KINDS[b[k + 2]];
        ctx.fillStyle = COLORS[kind];
        // A partial-node booking is drawn thinner (its share of the node's GPUs).
        const frac = r.gpus ? Math.min(1, b[k + 3] / r.gpus) : 1;
        const bh = Math.max(3, (ROW_H - 4) * frac);
        ctx.fillRect(xs, y + 2 + (ROW_H - 4 - bh), Math.max(1, xe - xs - 1), bh);
        if (xe - xs > 60) {
          ctx.fillStyle = '#fff';
          ctx.fillText(r.names[k / 4], xs + 3, y + ROW_H / 2, xe - xs - 6);
        }
      }
    }
    // The label column and the time axis are drawn over the rows.
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, AXIS_H, LABEL_W, h - AXIS_H);
    ctx.fillStyle = '#1b1f24';
    for (let i = first; i < last; i++) {
      const y = AXIS_H + i * ROW_H - sc.scrollTop;
      ctx.fillText(rows[i].node, 4, y + ROW_H / 2, LABEL_W - 8);
    }
    ctx.fillStyle = '#eaeef2';
    ctx.fillRect(0, 0, w, AXIS_H);
    ctx.fillStyle = '#1b1f24';
    ctx.fillText(`${rows.length} nodes`, 4, AXIS_H / 2);
    for (let t = firstTick; t <= tRight; t += step) {
      if (x(t) >= LABEL_W) ctx.fillText(tickLabel(t, step), x(t) + 2, AXIS_H / 2);
    }
    if (now >= tLeft && now <= tRight) {
      ctx.fillStyle = '#cf222e';
      ctx.fillRect(x(now), 0, 2, h);
    }
    const ms = performance.now() - t0;
    const stats = (window.__egsGantt = window.__egsGantt || { draws: [], rows: 0 });
    stats.draws.push(ms);
    if (stats.draws.length > 2000) stats.draws.splice(0, 1000);
    stats.rows = rows.length;
    stats.visible = last - first;
    if (first !== view.first || last !== view.last) setView({ first, last });
  };
  // The frame calls the latest render's draw (zoom and rows may change before it comes).
  drawRef.current = draw;
  const schedule = () => {
    if (!frame.current) frame.current = requestAnimationFrame(() => drawRef.current());
  };

  useEffect(schedule);
  useEffect(() => {
    addEventListener('resize', schedule);
    return () => {
      removeEventListener('resize', schedule);
      cancelAnimationFrame(frame.current);
    };
  }, []);
  // Start with "now" near the left edge.
  useEffect(() => {
    if (rows && scroller.current) scroller.current.scrollLeft = Math.max(0, (now - from) * pxPerMs - 200);
  }, [rows]);

  // Zoom keeping the instant at the middle of the view in place.
  const zoomTo = (z) => {
    const nz = Math.max(0, Math.min(ZOOMS.length - 1, z));
    const sc = scroller.current;
    if (nz === zoom || !sc) return;
    const mid = from + (sc.scrollLeft + (sc.clientWidth - LABEL_W) / 2) / pxPerMs;
    setZoom(nz);
    const npx = ZOOMS[nz] / HOUR;
    requestAnimationFrame(() => {
      sc.scrollLeft = Math.max(0, (mid - from) * npx - (sc.clientWidth - LABEL_W) / 2);
      schedule();
    });
  };
  const onKey = (e) => {
    if (e.key === '+' || e.key === '=') { zoomTo(zoom + 1); e.preventDefault(); }
    if (e.key === '-') { zoomTo(zoom - 1); e.preventDefault(); }
    if (e.key === 'Enter' && rows) {
      const r = rows[view.first];
      if (r) setPicked(describeRow(r));
    }
  };
  const onClick = (e) => {
    const sc = scroller.current;
    if (!sc || !rows) return;
    const rect = sc.getBoundingClientRect();
    const px = e.clientX - rect.left;
    const py = e.clientY - rect.top;
    if (py < AXIS_H) return;
    const i = Math.floor((py - AXIS_H + sc.scrollTop) / ROW_H);
    const r = rows[i];
    if (!r) return;
    const t = from + (sc.scrollLeft + px - LABEL_W) / pxPerMs;
    for (let k = 0; k < r.bars.length; k += 4) {
      if (r.bars[k] <= t && t < r.bars[k + 1]) {
        return setPicked(`${r.node}: ${r.names[k / 4]}, ${KINDS[r.bars[k + 2]].toLowerCase()}, ${clock(r.bars[k])} to ${clock(r.bars[k + 1])} (${duration((r.bars[k + 1] - r.bars[k]) / 1000)}), ${r.bars[k + 3]} GPUs`);
      }
    }
    for (const [s, en] of r.unavailable) {
      if (s <= t && t < en) return setPicked(`${r.node}: unavailable ${clock(s)} to ${clock(en)}`);
    }
    setPicked(describeRow(r));
  };
  const jump = (e) => {
    e.preventDefault();
    if (!rows || !find.trim()) return;
    const i = rows.findIndex((r) => r.node.includes(find.trim()));
    if (i < 0) return setPicked(`No node matches "${find.trim()}".`);
    scroller.current.scrollTop = i * ROW_H;
    setPicked(describeRow(rows[i]));
    scroller.current.focus();
  };

  return html`<section aria-labelledby="gantt-h">
    <h1 id="gantt-h">Schedule</h1>
    <div class="toolbar">
      <label for="g-cluster">Cluster</label>
      <select id="g-cluster" value=${filters.cluster} onChange=${(e) => setFilters({ ...filters, cluster: e.currentTarget.value })}>
        <option value="">all</option>
        ${pools.clusters.map((c) => html`<option value=${c}>${c}</option>`)}
      </select>
      <label for="g-shape">Shape</label>
      <select id="g-shape" value=${filters.shape} onChange=${(e) => setFilters({ ...filters, shape: e.currentTarget.value })}>
        <option value="">all</option>
        ${pools.shapes.map((s) => html`<option value=${s}>${s}</option>`)}
      </select>
      <button type="button" onClick=${() => zoomTo(zoom - 1)} disabled=${zoom === 0} aria-label="Zoom out">−</button>
      <span data-testid="zoom">${pxPerHour} px/hour</span>
      <button type="button" onClick=${() => zoomTo(zoom + 1)} disabled=${zoom === ZOOMS.length - 1} aria-label="Zoom in">+</button>
      <form class="actions" role="search" onSubmit=${jump}>
        <label for="g-find">Node</label>
        <input id="g-find" type="search" class="mid" value=${find} onInput=${(e) => setFind(e.currentTarget.value)} />
        <button type="submit">Go to node</button>
      </form>
    </div>
    <p class="legend muted">
      ${KINDS.map((k) => html`<span><i style=${`background:${COLORS[k]}`}></i>${k === 'Past' ? 'ran' : k === 'Reserved' ? 'reserved now' : 'planned'}</span>`)}
      <span><i style="background:rgba(180,35,24,.35)"></i>unavailable</span>
      <span><i style="background:#cf222e"></i>now</span>
    </p>
    <${ErrorBox} error=${error} />
    ${rows == null
      ? html`<p role="status">Loading the schedule… ${progress}</p>`
      : html`<div class="gantt">
          <canvas ref=${canvas} aria-hidden="true"></canvas>
          <div class="gantt-scroll" ref=${scroller} tabindex="0" role="region" data-testid="gantt"
            aria-label=${`Schedule of ${rows.length} nodes over two weeks; arrows scroll, plus and minus zoom, Enter describes the top row`}
            onScroll=${schedule} onKeyDown=${onKey} onClick=${onClick}>
            <div style=${`width:${LABEL_W + width}px;height:${AXIS_H + rows.length * ROW_H}px`}></div>
          </div>
        </div>
        <p class="muted" role="status" data-testid="gantt-view">Nodes ${rows.length ? view.first + 1 : 0}–${view.last} of ${rows.length}, ${clock(from)} to ${clock(to)}.</p>
        <p role="status" aria-live="polite" data-testid="gantt-picked">${picked}</p>`}
  </section>`;
}

function describeRow(r) {
  const n = r.bars.length / 4;
  return `${r.node} (${r.cluster}, ${r.shape}): ${n} booking${n === 1 ? '' : 's'}${r.unavailable.length ? ', unavailable for a time' : ''}.`;
}

// Axis ticks: about one every 80 px, at round hours or days.
export function tickStep(pxPerHour) {
  for (const hours of [1, 2, 3, 6, 12, 24, 48, 96]) {
    if (hours * pxPerHour >= 80) return hours * HOUR;
  }
  return 7 * 24 * HOUR;
}

function tickLabel(t, step) {
  const d = new Date(t);
  const day = `${d.toLocaleString('en', { month: 'short', timeZone: 'UTC' })} ${d.getUTCDate()}`;
  if (step >= 24 * HOUR) return day;
  const hm = d.toISOString().slice(11, 16);
  return d.getUTCHours() === 0 ? `${day} ${hm}` : hm;
}

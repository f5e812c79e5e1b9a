// Inventory: per GPU shape and cluster, the nodes, how many are free now, and when k of them
// will next be free at once (from each node's schedule of reservations; a quote is the exact
// answer for a request, since it also counts the queue ahead).
import { useState } from 'preact/hooks';

import { html } from '../html.js';
import { API } from '../api.js';
import { ErrorBox, usePoll, useNow } from '../components.js';
import { clock, money, parseTime, relative } from '../format.js';

// The instant from which `node` has no reservation left that covers it (now if free now), or
// null when it is not healthy.
export function freeFrom(node, now) {
  if ((node.status && node.status.health) !== 'Healthy') return null;
  // Its bookings and its maintenance windows: a node in a window is not free either.
  const bookings = [...((node.status && node.status.schedule) || []), ...((node.status && node.status.maintenance) || [])]
    .map((b) => ({ start: parseTime(b.start), end: parseTime(b.end) }))
    .filter((b) => b.start != null && b.end != null);
  let t = now;
  for (let moved = true; moved; ) {
    moved = false;
    for (const b of bookings) {
      if (b.start <= t && t < b.end) {
        t = b.end;
        moved = true;
      }
    }
  }
  return t;
}

function pools(nodes, now) {
  const byKey = new Map();
  for (const n of nodes) {
    const key = `${n.spec.shape}\u0000${n.spec.cluster}`;
    if (!byKey.has(key)) byKey.set(key, { shape: n.spec.shape, cluster: n.spec.cluster, nodes: 0, healthy: 0, free: [] });
    const p = byKey.get(key);
    p.nodes += 1;
    const f = freeFrom(n, now);
    if (f != null) {
      p.healthy += 1;
      p.free.push(f);
    }
  }
  const out = [...byKey.values()];
  for (const p of out) {
    p.free.sort((a, b) => a - b);
    p.freeNow = p.free.filter((t) => t <= now).length;
  }
  return out.sort((a, b) => a.shape.localeCompare(b.shape) || a.cluster.localeCompare(b.cluster));
}

export function Inventory({ session }) {
  const now = useNow(5000);
  const [k, setK] = useState(1);
  const { data, error } = usePoll(async () => {
    const [nodes, shapes, clusters] = await Promise.all([
      session.api.get(`${API}/nodes`),
      session.api.get(`${API}/gpushapes`),
      session.api.get(`${API}/clusters`),
    ]);
    return { nodes: nodes.items || [], shapes: shapes.items || [], clusters: clusters.items || [] };
  }, 15000); // every node with its schedule: heavy on a large fleet, so not too often
  const shapeInfo = new Map((data ? data.shapes : []).map((s) => [s.metadata.name, s.spec]));
  const clusterInfo = new Map((data ? data.clusters : []).map((c) => [c.metadata.name, c]));
  const rows = data ? pools(data.nodes, now) : [];
  return html`<section aria-labelledby="inv-h">
    <h1 id="inv-h">Inventory</h1>
    <${ErrorBox} error=${error} />
    <p>
      <label for="inv-k">Show when this many nodes are next free at once: </label>
      <input id="inv-k" type="number" min="1" max="1000" value=${k}
        onInput=${(e) => setK(Math.max(1, Number(e.currentTarget.value) || 1))} />
    </p>
    ${data == null
      ? html`<p role="status">Loading…</p>`
      : html`<table class="grid" aria-describedby="inv-note">
          <caption class="sr-only">GPU shapes per cluster</caption>
          <thead><tr>
            <th scope="col">Shape</th><th scope="col">GPU</th><th scope="col">Cluster</th>
            <th scope="col">Nodes</th><th scope="col">Healthy</th><th scope="col">Free now</th>
            <th scope="col">${k} node${k === 1 ? '' : 's'} free</th><th scope="col">Price / GPU-hour</th>
          </tr></thead>
          <tbody>
            ${rows.map((p) => {
              const s = shapeInfo.get(p.shape) || {};
              const c = clusterInfo.get(p.cluster);
              const t = p.free.length >= k ? p.free[k - 1] : null;
              return html`<tr>
                <th scope="row">${p.shape}</th>
                <td>${s.gpusPerNode ? `${s.gpusPerNode}× ${s.gpuModel}` : '–'}</td>
                <td>${p.cluster}${c && c.spec ? html` <span class="muted">(${c.spec.cloud || c.spec.provider} ${c.spec.region || ''})</span>` : ''}</td>
                <td class="num">${p.nodes}</td>
                <td class="num">${p.healthy}</td>
                <td class="num" data-testid="free-now">${p.freeNow}</td>
                <td>${t == null ? 'never (too few healthy nodes)' : t <= now ? 'now' : `${clock(t, now)} (${relative(t, now)})`}</td>
                <td class="num">${money(s.pricePerGpuHour)}</td>
              </tr>`;
            })}
          </tbody>
        </table>
        <p id="inv-note" class="muted">Free means healthy with no reservation now. Queued requests
          ahead of yours may take nodes first: "Get wait time" on a new request gives the exact
          estimate.</p>`}
  </section>`;
}

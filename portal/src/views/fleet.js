// Admin: clusters, projects and nodes. Nodes show health, shape, free GPUs and what they hold;
// an admin cordons, uncordons (recover) or marks a node failed, and books maintenance windows.
import { useState } from 'preact/hooks';

import { html } from '../html.js';
import { API } from '../api.js';
import { ErrorBox, usePoll, useNow } from '../components.js';
import { when } from '../format.js';

const MAX_SHOWN = 100;

export function Fleet({ session }) {
  const { api } = session;
  const now = useNow(10000);
  const [q, setQ] = useState('');
  const [health, setHealth] = useState('');
  const [notice, setNotice] = useState('');
  const { data, error, reload } = usePoll(async () => {
    const [clusters, projects, nodes] = await Promise.all([
      api.get(`${API}/clusters`), api.get(`${API}/projects`), api.get(`${API}/nodes`),
    ]);
    return { clusters: clusters.items || [], projects: projects.items || [], nodes: nodes.items || [] };
  }, 5000);
  const act = async (what, fn) => {
    setNotice('');
    try {
      await fn();
      setNotice(`${what}: done.`);
    } catch (e) {
      setNotice(`${what}: ${e.message}`);
    }
    reload();
  };
  const nodes = data ? data.nodes : [];
  const words = q.toLowerCase().split(/\s+/).filter(Boolean);
  const shown = nodes
    .filter((n) => !health || healthOf(n) === health)
    .filter((n) => words.every((w) => `${n.metadata.name} ${n.spec.cluster} ${n.spec.shape}`.toLowerCase().includes(w)));
  const perCluster = (c) => nodes.filter((n) => n.spec.cluster === c);
  return html`<section aria-labelledby="fleet-h">
    <h1 id="fleet-h">Fleet</h1>
    <${ErrorBox} error=${error} />
    ${notice ? html`<p class="notice" role="status" data-testid="fleet-notice">${notice}</p>` : ''}
    ${data == null ? html`<p role="status">Loading…</p>` : html`
      <h2>Clusters</h2>
      <table class="grid">
        <thead><tr><th scope="col">Cluster</th><th scope="col">Project</th><th scope="col">Provider</th><th scope="col">Region</th>
          <th scope="col">Nodes</th><th scope="col">Not healthy</th></tr></thead>
        <tbody>${data.clusters.map((c) => {
          const ns = perCluster(c.metadata.name);
          return html`<tr><th scope="row">${c.metadata.name}</th><td>${c.spec.project || '–'}</td>
            <td>${c.spec.provider || '–'}${c.spec.cloud ? ` (${c.spec.cloud})` : ''}</td><td>${c.spec.region || '–'}</td>
            <td class="num">${ns.length}</td><td class="num">${ns.filter((n) => healthOf(n) !== 'Healthy').length}</td></tr>`;
        })}</tbody>
      </table>
      <h2>Projects</h2>
      <ul class="plain">${data.projects.map((p) => html`<li><strong>${p.metadata.name}</strong>:
        <span class="muted">clusters ${data.clusters.filter((c) => c.spec.project === p.metadata.name).map((c) => c.metadata.name).join(', ') || 'none'}</span></li>`)}</ul>
      <h2>Nodes</h2>
      <div class="toolbar" role="search">
        <label for="fl-q">Find</label>
        <input id="fl-q" type="search" value=${q} placeholder="name, cluster, shape" onInput=${(e) => setQ(e.currentTarget.value)} />
        <label for="fl-h">Health</label>
        <select id="fl-h" value=${health} onChange=${(e) => setHealth(e.currentTarget.value)}>
          <option value="">all</option><option>Healthy</option><option>Cordoned</option><option>Unhealthy</option>
        </select>
        <span class="muted" role="status">${shown.length} node${shown.length === 1 ? '' : 's'}${shown.length > MAX_SHOWN ? `, first ${MAX_SHOWN} shown` : ''}</span>
      </div>
      <table class="grid">
        <thead><tr><th scope="col">Node</th><th scope="col">Cluster</th><th scope="col">Shape</th><th scope="col">Health</th>
          <th scope="col">Free GPUs</th><th scope="col">Next booking</th><th scope="col">Actions</th></tr></thead>
        <tbody>${shown.slice(0, MAX_SHOWN).map((n) => html`<${NodeRow} key=${n.metadata.name} n=${n} api=${api} act=${act} now=${now} />`)}</tbody>
      </table>`}
  </section>`;
}

export function healthOf(n) {
  return (n.status && n.status.health) || 'Healthy';
}

function NodeRow({ n, api, act, now }) {
  const name = n.metadata.name;
  const [open, setOpen] = useState(false);
  const path = `${API}/nodes/${encodeURIComponent(name)}`;
  const h = healthOf(n);
  const sched = (n.status && n.status.schedule) || [];
  const next = sched[0];
  return html`<tr data-testid="node-row" data-name=${name}>
    <th scope="row">${name}</th>
    <td>${n.spec.cluster}</td>
    <td>${n.spec.shape}</td>
    <td><span class=${`health health-${h.toLowerCase()}`} data-testid="health">${h}</span></td>
    <td class="num">${n.status && n.status.freeGpusNow != null ? n.status.freeGpusNow : '–'} of ${(n.spec.gpus || []).length}</td>
    <td>${next ? html`${next.request} <span class="muted">(${next.kind || ''} ${when(next.start, now)})</span>` : html`<span class="muted">none</span>`}</td>
    <td class="actions">
      ${h === 'Healthy'
        ? html`<button type="button" onClick=${() => act(`Cordon ${name}`, () => api.post(`${path}/cordon`, {}))}>Cordon ${name}</button>`
        : html`<button type="button" onClick=${() => act(`Uncordon ${name}`, () => api.post(`${path}/recover`, {}))}>${h === 'Cordoned' ? 'Uncordon' : 'Recover'} ${name}</button>`}
      <button type="button" aria-expanded=${open} onClick=${() => setOpen(!open)}>Maintenance…</button>
      ${open ? html`<${Maintenance} name=${name} path=${path} api=${api} act=${act} done=${() => setOpen(false)} />` : ''}
    </td>
  </tr>`;
}

// A maintenance window [start, end) in UTC (datetime-local inputs read as UTC).
function Maintenance({ name, path, api, act, done }) {
  const hour = 3600e3;
  const iso = (t) => new Date(t).toISOString().slice(0, 16);
  const [start, setStart] = useState(iso(Math.ceil(Date.now() / hour) * hour + hour));
  const [end, setEnd] = useState(iso(Math.ceil(Date.now() / hour) * hour + 3 * hour));
  const id = `mw-${name}`;
  const submit = (e) => {
    e.preventDefault();
    act(`Maintenance of ${name}`, async () => {
      await api.post(`${path}/maintenance`, { start: `${start}:00Z`, end: `${end}:00Z` });
      done();
    });
  };
  return html`<form class="actions edit" onSubmit=${submit} aria-label=${`Maintenance window of ${name}`}>
    <label for=${`${id}-s`}>From (UTC)</label>
    <input id=${`${id}-s`} type="datetime-local" value=${start} onInput=${(e) => setStart(e.currentTarget.value)} />
    <label for=${`${id}-e`}>To (UTC)</label>
    <input id=${`${id}-e`} type="datetime-local" value=${end} onInput=${(e) => setEnd(e.currentTarget.value)} />
    <button type="submit" disabled=${!start || !end || end <= start}>Book maintenance</button>
  </form>`;
}

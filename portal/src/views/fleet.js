// Admin: clusters, projects and nodes. Nodes show health, shape, free GPUs and what they hold;
// an admin cordons, uncordons (recover) or marks a node failed, books and cancels maintenance
// windows, and renames projects.
//
// Loading: one list of each kind, then a watch of the nodes from the list's resourceVersion
// (health and maintenance changes stream in as they are stored); every RESYNC_MS the lists are
// read again (the live columns, free GPUs and next booking, are computed by the server at read
// time and have no change events). At 5,000 nodes this replaces 36 requests and ~12 full node
// lists a minute with 3 requests and one list (docs/benchmarks.md).
import { useEffect, useState } from 'preact/hooks';

import { html } from '../html.js';
import { API } from '../api.js';
import { ErrorBox, useNow } from '../components.js';
import { serverNow, when } from '../format.js';

const MAX_SHOWN = 100;
export const RESYNC_MS = 60000;

// Applies one watch event ({type, object}) to `nodes` (a Map by name). A node object from a
// watch may lack the read-time fields (status.freeGpusNow, status.schedule): the last known
// ones are kept. Returns true when something changed.
export function applyNodeEvent(nodes, ev) {
  if (!ev || !ev.object || !ev.object.metadata) return false;
  const name = ev.object.metadata.name;
  if (ev.type === 'DELETED') return nodes.delete(name);
  if (ev.type !== 'ADDED' && ev.type !== 'MODIFIED') return false;
  const old = nodes.get(name);
  const status = { ...(ev.object.status || {}) };
  if (old && old.status) {
    for (const k of ['freeGpusNow', 'schedule']) {
      if (status[k] === undefined && old.status[k] !== undefined) status[k] = old.status[k];
    }
  }
  nodes.set(name, { ...ev.object, status });
  return true;
}

// Nodes, clusters and projects, live: {data, error, reload, put}.
function useFleet(api) {
  const [state, setState] = useState({ data: null, error: null });
  const [tick, setTick] = useState(0);
  const [shared] = useState(() => ({ nodes: new Map(), clusters: [], projects: [], resync: null }));
  useEffect(() => {
    const ctl = new AbortController();
    let timer = 0;
    const publish = () => {
      if (ctl.signal.aborted) return;
      const data = { clusters: shared.clusters, projects: shared.projects, nodes: [...shared.nodes.values()] };
      setState({ data, error: null });
    };
    const run = async () => {
      while (!ctl.signal.aborted) {
        const round = new AbortController();
        const stop = () => round.abort();
        ctl.signal.addEventListener('abort', stop);
        shared.resync = stop;
        timer = setTimeout(stop, RESYNC_MS);
        try {
          const [clusters, projects, nodes] = await Promise.all([
            api.get(`${API}/clusters`), api.get(`${API}/projects`), api.get(`${API}/nodes`),
          ]);
          shared.clusters = clusters.items || [];
          shared.projects = projects.items || [];
          shared.nodes = new Map((nodes.items || []).map((n) => [n.metadata.name, n]));
          publish();
          await api.watch(`${API}/nodes`, nodes.metadata && nodes.metadata.resourceVersion, (ev) => {
            if (applyNodeEvent(shared.nodes, ev)) publish();
          }, round.signal);
          // The server ended the watch (timeout): list again at once.
        } catch (error) {
          if (ctl.signal.aborted) return;
          if (!round.signal.aborted) {
            setState((s) => ({ data: s.data, error }));
            await new Promise((ok) => setTimeout(ok, 2000));
          }
        } finally {
          clearTimeout(timer);
          ctl.signal.removeEventListener('abort', stop);
        }
      }
    };
    run();
    return () => {
      ctl.abort();
      clearTimeout(timer);
    };
  }, [tick]);
  return {
    ...state,
    // Reads everything again (after an action on clusters or projects).
    reload: () => (shared.resync ? shared.resync() : setTick((t) => t + 1)),
    // An object an action returned: shown at once (the watch brings the same change).
    put: (node) => {
      if (applyNodeEvent(shared.nodes, { type: 'MODIFIED', object: node })) {
        setState((s) => ({ ...s, data: { ...s.data, nodes: [...shared.nodes.values()] } }));
      }
    },
  };
}

export function Fleet({ session }) {
  const { api } = session;
  const now = useNow(10000);
  const [q, setQ] = useState('');
  const [health, setHealth] = useState('');
  const [notice, setNotice] = useState('');
  const { data, error, reload, put } = useFleet(api);
  const act = async (what, fn) => {
    setNotice('');
    try {
      const out = await fn();
      if (out && out.kind === 'Node') put(out);
      else reload();
      setNotice(`${what}: done.`);
    } catch (e) {
      setNotice(`${what}: ${e.message}`);
    }
  };
  const nodes = data ? data.nodes : [];
  const words = q.toLowerCase().split(/\s+/).filter(Boolean);
  const shown = nodes
    .filter((n) => !health || healthOf(n) === health)
    .filter((n) => words.every((w) => `${n.metadata.name} ${n.spec.cluster} ${n.spec.shape}`.toLowerCase().includes(w)))
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
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
      <ul class="plain">${data.projects.map((p) => html`<${ProjectItem} key=${p.metadata.name} p=${p} clusters=${data.clusters} api=${api} act=${act} />`)}</ul>
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
      <button type="button" aria-expanded=${open} onClick=${() => setOpen(!open)}>Maintenance…${
        n.status && n.status.maintenance ? ` (${n.status.maintenance.length})` : ''}</button>
      ${open ? html`<${Maintenance} name=${name} path=${path} api=${api} act=${act} now=${now}
        windows=${(n.status && n.status.maintenance) || []} done=${() => setOpen(false)} />` : ''}
    </td>
  </tr>`;
}

// A project's name and clusters; its display name is edited in place.
function ProjectItem({ p, clusters, api, act }) {
  const name = p.metadata.name;
  const shown = (p.spec && p.spec.displayName) || '';
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState(shown);
  const id = `pj-${name}`;
  const save = (e) => {
    e.preventDefault();
    act(`Project ${name}`, async () => {
      await api.patch(`${API}/projects/${encodeURIComponent(name)}`, { spec: { displayName: text.trim() } });
      setEditing(false);
    });
  };
  return html`<li data-testid="project" data-name=${name}><strong>${name}</strong>${shown ? ` (${shown})` : ''}${': '}
    <span class="muted">clusters ${clusters.filter((c) => c.spec.project === name).map((c) => c.metadata.name).join(', ') || 'none'}</span>${' '}
    <button type="button" aria-expanded=${editing} onClick=${() => { setText(shown); setEditing(!editing); }}>Edit ${name}</button>
    ${editing ? html`<form class="actions edit" onSubmit=${save} aria-label=${`Project ${name}`}>
      <label for=${`${id}-dn`}>Display name</label>
      <input id=${`${id}-dn`} type="text" maxlength="128" value=${text} onInput=${(e) => setText(e.currentTarget.value)} />
      <button type="submit" disabled=${text.trim() === shown}>Save ${name}</button>
    </form>` : ''}
  </li>`;
}

// A maintenance window [start, end) in UTC (datetime-local inputs read as UTC), and the node's
// booked windows with a Cancel each.
function Maintenance({ name, path, api, act, done, windows, now }) {
  const hour = 3600e3;
  const iso = (t) => new Date(t).toISOString().slice(0, 16);
  const [start, setStart] = useState(iso(Math.ceil(serverNow() / hour) * hour + hour));
  const [end, setEnd] = useState(iso(Math.ceil(serverNow() / hour) * hour + 3 * hour));
  const id = `mw-${name}`;
  const submit = (e) => {
    e.preventDefault();
    act(`Maintenance of ${name}`, async () => {
      const node = await api.post(`${path}/maintenance`, { start: `${start}:00Z`, end: `${end}:00Z` });
      done();
      return node;
    });
  };
  return html`<form class="actions edit" onSubmit=${submit} aria-label=${`Maintenance window of ${name}`}>
    <label for=${`${id}-s`}>From (UTC)</label>
    <input id=${`${id}-s`} type="datetime-local" value=${start} onInput=${(e) => setStart(e.currentTarget.value)} />
    <label for=${`${id}-e`}>To (UTC)</label>
    <input id=${`${id}-e`} type="datetime-local" value=${end} onInput=${(e) => setEnd(e.currentTarget.value)} />
    <button type="submit" disabled=${!start || !end || end <= start}>Book maintenance</button>
    ${windows.length ? html`<ul class="plain" aria-label=${`Maintenance windows of ${name}`}>${windows.map((w) => html`<li data-testid="maintenance-window">
      ${`Booked: ${when(w.start, now)} to ${when(w.end, now)} `}
      <button type="button" class="danger" aria-label=${`Cancel maintenance of ${name} from ${w.start}`}
        onClick=${() => act(`Cancel maintenance of ${name}`, () => api.post(`${path}/cancel-maintenance`, { start: w.start, end: w.end }))}>Cancel</button>
    </li>`)}</ul>` : ''}
  </form>`;
}

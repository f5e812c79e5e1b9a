// My requests: phase, queue position, promised vs current estimate, progress of an active
// reservation, why a queued one waits; delete while queued, early release, extend (with the
// impact preview).
import { useState } from 'preact/hooks';

import { html } from '../html.js';
import { API, gprPath } from '../api.js';
import { ErrorBox, Phase, Progress, usePoll, useNow } from '../components.js';
import { WAIT_WORDS, duration, parseDuration, parseTime, when } from '../format.js';

const LIVE = ['PendingApproval', 'Queued', 'Provisioning', 'Active', 'Releasing'];
const RUNNING = ['Provisioning', 'Active', 'Releasing'];
export const MAX_SHOWN = 200;

function mine(items, me) {
  if (me.role === 'member') return items.filter((g) => me.workspaces.includes(g.metadata.namespace));
  return items;
}

// 0 running (provisioning, active, releasing), 1 waiting (pending approval, queued), 2 finished.
function rank(phase) {
  if (RUNNING.includes(phase)) return 0;
  return LIVE.includes(phase) ? 1 : 2;
}

// The order of the list: running requests, then waiting ones by queue position, then finished
// ones; newest first within each.
export function orderRequests(a, b) {
  const ra = rank(a.status.phase);
  const rb = rank(b.status.phase);
  if (ra !== rb) return ra - rb;
  if (ra === 1) {
    const qa = a.status.queuePosition ?? 1e9;
    const qb = b.status.queuePosition ?? 1e9;
    if (qa !== qb) return qa - qb;
  }
  return String(b.metadata.creationTimestamp).localeCompare(String(a.metadata.creationTimestamp));
}

export function Requests({ session }) {
  const { api, me } = session;
  const now = useNow(1000);
  const [filter, setFilter] = useState('');
  const [showDone, setShowDone] = useState(true);
  const [notice, setNotice] = useState('');
  // Members read only their workspaces' requests; others the whole list.
  const { data, error, reload } = usePoll(async () => {
    if (me.role !== 'member') return api.get(`${API}/gpuprovisionrequests`);
    const lists = await Promise.all(me.workspaces.map((ws) => api.get(gprPath(ws))));
    return { items: lists.flatMap((l) => l.items || []) };
  }, 2000);
  const all = data ? mine(data.items || [], me).map((g) => ({ ...g, status: g.status || {} })) : null;
  const spaces = all ? [...new Set(all.map((g) => g.metadata.namespace))].sort() : [];
  const listed = all
    ? all
        .filter((g) => !filter || g.metadata.namespace === filter)
        .filter((g) => showDone || LIVE.includes(g.status.phase))
        .sort(orderRequests)
    : null;
  const shown = listed ? listed.slice(0, MAX_SHOWN) : null;
  const act = async (what, fn) => {
    setNotice('');
    try {
      const msg = await fn();
      setNotice(msg || `${what}: done.`);
    } catch (e) {
      setNotice(`${what}: ${e.message}`);
    }
    reload();
  };
  return html`<section aria-labelledby="req-h">
    <h1 id="req-h">My requests</h1>
    <div class="toolbar">
      <label for="req-ws">Workspace</label>
      <select id="req-ws" value=${filter} onChange=${(e) => setFilter(e.currentTarget.value)}>
        <option value="">all</option>
        ${spaces.map((s) => html`<option value=${s}>${s}</option>`)}
      </select>
      <label class="check"><input type="checkbox" checked=${showDone}
        onChange=${(e) => setShowDone(e.currentTarget.checked)} /> Show finished</label>
      ${me.role !== 'viewer' ? html`<a class="button" href="#/new">New request</a>` : ''}
    </div>
    <${ErrorBox} error=${error} />
    ${notice ? html`<p class="notice" role="status" data-testid="notice">${notice}</p>` : ''}
    ${shown == null
      ? html`<p role="status">Loading…</p>`
      : shown.length === 0
        ? html`<p>No requests yet.${me.role !== 'viewer' ? html` <a href="#/new">Ask for GPUs</a>.` : ''}</p>`
        : html`${listed.length > MAX_SHOWN
              ? html`<p class="muted" role="status" data-testid="requests-cut">${listed.length} requests, first ${MAX_SHOWN} shown (running, then queued, then finished).</p>`
              : ''}
          <ul class="requests">
            ${shown.map((g) => html`<${RequestCard} key=${`${g.metadata.namespace}/${g.metadata.name}`}
              gpr=${g} api=${api} now=${now} act=${act} canWrite=${me.role !== 'viewer'} />`)}
          </ul>`}
  </section>`;
}

function Estimate({ s, now }) {
  const promised = s.promisedStartP50 || s.promisedStart;
  const planned = s.plannedStart;
  const slip = parseTime(planned) != null && parseTime(promised) != null ? (parseTime(planned) - parseTime(promised)) / 1000 : null;
  return html`<dl class="facts">
    ${promised ? html`<dt>Promised start</dt><dd>${when(promised, now)}${s.promisedStartP90 ? html` <span class="muted">(P90 ${when(s.promisedStartP90, now)})</span>` : ''}</dd>` : ''}
    ${planned ? html`<dt>Current estimate</dt><dd data-testid="estimate">${when(planned, now)}${slip != null && Math.abs(slip) >= 60 ? html` <span class=${slip > 0 ? 'late' : 'early'}>${slip > 0 ? `${duration(slip)} later` : `${duration(-slip)} earlier`} than promised</span>` : ''}</dd>` : ''}
  </dl>`;
}

function RequestCard({ gpr, api, now, act, canWrite }) {
  const { metadata: m, spec, status: s } = gpr;
  const [why, setWhy] = useState('');
  const [ext, setExt] = useState('1h');
  const [impact, setImpact] = useState(null);
  const [editing, setEditing] = useState(false);
  const ns = m.namespace;
  const id = `${ns}-${m.name}`;
  const shape = s.shape || s.plannedShape || spec.shape || (spec.shapes || []).join(' | ');
  const cluster = s.cluster || s.plannedCluster || (spec.clusters || []).join(' | ') || 'any cluster';
  const explain = async () => {
    try {
      const r = await api.post(`${gprPath(ns, m.name)}/explain`, {});
      setWhy(r.explanation || JSON.stringify(r));
    } catch (e) {
      setWhy(e.message);
    }
  };
  const preview = async () => {
    if (parseDuration(ext) == null) return setImpact({ error: 'Duration looks like 30m or 2h.' });
    try {
      const r = await api.post(`${gprPath(ns, m.name)}/whatif`, { extend: ext });
      setImpact(r);
    } catch (e) {
      setImpact({ error: e.message });
    }
  };
  const extend = () =>
    act(`Extend ${m.name}`, async () => {
      const r = await api.post(`${gprPath(ns, m.name)}/extend`, { duration: ext });
      setImpact(null);
      const pending = r && r.status && r.status.pendingExtension;
      return pending ? `Extension of ${m.name} by ${ext} waits for approval: ${pending.reason || ''}` : `${m.name} extended by ${ext}.`;
    });
  return html`<li class="card request" data-testid="request" data-name=${m.name} aria-labelledby=${`${id}-h`}>
    <div class="request-head">
      <h2 id=${`${id}-h`}>${m.name}</h2>
      <${Phase} phase=${s.phase} />
      <span class="muted">${ns} · ${spec.nodes} × ${shape} · ${cluster} · ${spec.duration} · priority ${spec.priority}</span>
    </div>
    ${s.queuePosition != null && (s.phase === 'Queued' || s.phase === 'PendingApproval')
      ? html`<p>Queue position <strong data-testid="queue-position">${s.queuePosition}</strong>${s.waitCause ? html`: ${WAIT_WORDS[s.waitCause] || s.waitCause}` : ''}.</p>`
      : ''}
    ${s.phase === 'Queued' || s.phase === 'PendingApproval' || s.phase === 'Provisioning' ? html`<${Estimate} s=${s} now=${now} />` : ''}
    ${s.phase === 'Active' ? html`<${Progress} start=${s.startTime} end=${s.endTime} now=${now} />
      <p class="muted">Started ${when(s.startTime, now)}${s.promisedStart ? `; promised ${when(s.promisedStart, now)}` : ''}; ends ${when(s.endTime, now)}.</p>` : ''}
    ${s.startTime && s.phase !== 'Active' && s.phase !== 'Provisioning' ? html`<p class="muted">Started ${when(s.startTime, now)}${s.finishTime ? `, finished ${when(s.finishTime, now)}` : s.endTime ? `, ends ${when(s.endTime, now)}` : ''}.</p>` : ''}
    ${s.nodes && s.nodes.length && s.phase === 'Active' ? html`<p class="muted">Nodes: ${s.nodes.join(', ')}</p>` : ''}
    ${s.message || s.reason ? html`<p class="muted">${[s.reason, s.message].filter(Boolean).join(': ')}</p>` : ''}
    ${s.pendingExtension ? html`<p class="notice">Extension by ${s.pendingExtension.duration} waits for approval${s.pendingExtension.reason ? `: ${s.pendingExtension.reason}` : ''}.</p>` : ''}
    ${why ? html`<pre class="why" aria-label=${`Why ${m.name} waits`}>${why}</pre>` : ''}
    <div class="actions">
      ${canWrite && (s.phase === 'Queued' || s.phase === 'PendingApproval')
        ? html`<button type="button" onClick=${explain}>Why does it wait?</button>
            <button type="button" aria-expanded=${editing} onClick=${() => setEditing(!editing)}>Edit ${m.name}</button>
            <button type="button" class="danger" onClick=${() => act(`Delete ${m.name}`, async () => {
              await api.del(gprPath(ns, m.name));
              return `${m.name} deleted.`;
            })}>Delete ${m.name}</button>`
        : ''}
      ${canWrite && s.phase === 'Active'
        ? html`<button type="button" class="danger" onClick=${() => act(`Release ${m.name}`, async () => {
              await api.post(`${gprPath(ns, m.name)}/release`, {});
              return `${m.name} released early.`;
            })}>Release ${m.name} now</button>
            <label for=${`${id}-ext`}>Extend by</label>
            <input id=${`${id}-ext`} class="short" type="text" value=${ext}
              onInput=${(e) => { setExt(e.currentTarget.value); setImpact(null); }} />
            <button type="button" onClick=${preview}>Preview impact</button>
            <button type="button" onClick=${extend}>Extend</button>`
        : ''}
    </div>
    ${impact ? html`<${Impact} impact=${impact} />` : ''}
    ${editing && (s.phase === 'Queued' || s.phase === 'PendingApproval')
      ? html`<${EditForm} gpr=${gpr} id=${id} act=${act} api=${api} done=${() => setEditing(false)} />`
      : ''}
  </li>`;
}

// The merge patch of a waiting request's spec from the edit form's fields (their text); null
// when a field is wrong. An empty priority keeps the current one (the field is not sent).
export function editSpec(nodes, dur, prio) {
  const n = Number(nodes);
  const p = String(prio ?? '').trim();
  if (!Number.isInteger(n) || n < 1 || parseDuration(dur) == null) return null;
  if (p !== '' && !/^-?\d+$/.test(p)) return null;
  const spec = { nodes: n, duration: String(dur).trim() };
  if (p !== '') spec.priority = Number(p);
  return spec;
}

// Edit nodes, duration and priority while the request waits (a merge patch of its spec).
function EditForm({ gpr, id, act, api, done }) {
  const { metadata: m, spec } = gpr;
  const [nodes, setNodes] = useState(String(spec.nodes));
  const [dur, setDur] = useState(spec.duration);
  const [prio, setPrio] = useState(String(spec.priority ?? ''));
  // A number field reads '' for text that is no number (badInput): refuse that, not keep the priority.
  const [badPrio, setBadPrio] = useState(false);
  const patch = badPrio ? null : editSpec(nodes, dur, prio);
  const save = (e) => {
    e.preventDefault();
    if (!patch) return;
    act(`Edit ${m.name}`, async () => {
      await api.patch(gprPath(m.namespace, m.name), { spec: patch });
      done();
      return `${m.name} changed.`;
    });
  };
  return html`<form class="actions edit" onSubmit=${save} aria-label=${`Edit ${m.name}`}>
    <label for=${`${id}-e-nodes`}>Nodes</label>
    <input id=${`${id}-e-nodes`} class="short" type="number" min="1" value=${nodes} onInput=${(e) => setNodes(e.currentTarget.value)} />
    <label for=${`${id}-e-dur`}>Duration</label>
    <input id=${`${id}-e-dur`} class="short" type="text" value=${dur} onInput=${(e) => setDur(e.currentTarget.value)} />
    <label for=${`${id}-e-prio`}>Priority</label>
    <input id=${`${id}-e-prio`} class="short" type="number" step="1" value=${prio} placeholder=${String(spec.priority ?? '')}
      onInput=${(e) => { setPrio(e.currentTarget.value); setBadPrio(!!(e.currentTarget.validity && e.currentTarget.validity.badInput)); }} />
    <button type="submit" disabled=${!patch}>Save changes</button>
  </form>`;
}

function Impact({ impact }) {
  if (impact.error) return html`<p class="error" role="alert">${impact.error}</p>`;
  const shifts = (impact.shifts || []).filter((x) => x.shiftSeconds == null || Math.abs(x.shiftSeconds) >= 1);
  if (!shifts.length) return html`<p class="ok" role="status">No queued request would start later.</p>`;
  return html`<div role="status">
    <p>${shifts.length} queued request${shifts.length === 1 ? '' : 's'} would move:</p>
    <ul>
      ${shifts.map((x) => html`<li>${x.namespace}/${x.name}: ${x.shiftSeconds > 0 ? `${duration(x.shiftSeconds)} later` : x.shiftSeconds < 0 ? `${duration(-x.shiftSeconds)} earlier` : 'changes'}</li>`)}
    </ul>
  </div>`;
}

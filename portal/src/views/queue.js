// Admin: the queue in order, with approve/reject for requests waiting for approval (approving
// first shows its computed impact: whose planned start would move, from the whatif action) and a
// priority change for queued ones; active reservations with early release and eviction.
import { useState } from 'preact/hooks';

import { html } from '../html.js';
import { API, gprPath } from '../api.js';
import { ErrorBox, Phase, usePoll, useNow } from '../components.js';
import { duration, parseTime, when } from '../format.js';

// The lines of an approval's impact (the whatif answer {shifts, start}): one per queued request
// whose planned start moves, "ns/name: <before> → <after> (+2h)", or "… loses its plan". Shifts
// under a second are left out (they would read "+0s").
export function impactLines(impact, now) {
  const at = (t) => (t ? when(t, now) : 'no plan');
  return (impact.shifts || []).flatMap((s) => {
    const who = s.namespace ? `${s.namespace}/${s.name}` : s.name;
    if (!s.after) return [`${who}: ${at(s.before)} → loses its plan`];
    if (!s.before) return [`${who}: no plan → ${at(s.after)}`];
    const d = typeof s.shiftSeconds === 'number' ? s.shiftSeconds : (parseTime(s.after) - parseTime(s.before)) / 1000;
    if (Math.abs(d) < 1) return [];
    return [`${who}: ${at(s.before)} → ${at(s.after)} (${d >= 0 ? '+' : '−'}${duration(Math.abs(d))})`];
  });
}

export function Queue({ session }) {
  const { api } = session;
  const now = useNow(5000);
  const [notice, setNotice] = useState('');
  const { data, error, reload } = usePoll(() => api.get(`${API}/gpuprovisionrequests`), 2000);
  const items = data ? (data.items || []).map((g) => ({ ...g, status: g.status || {} })) : null;
  const pending = items ? items.filter((g) => g.status.phase === 'PendingApproval') : [];
  const queued = items
    ? items.filter((g) => g.status.phase === 'Queued').sort((a, b) => (a.status.queuePosition ?? 1e9) - (b.status.queuePosition ?? 1e9))
    : [];
  const active = items ? items.filter((g) => g.status.phase === 'Active' || g.status.phase === 'Provisioning') : [];
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
  const props = { api, act, now };
  return html`<section aria-labelledby="q-h">
    <h1 id="q-h">Queue</h1>
    <${ErrorBox} error=${error} />
    ${notice ? html`<p class="notice" role="status">${notice}</p>` : ''}
    ${items == null ? html`<p role="status">Loading…</p>` : html`
      <h2>Waiting for approval (${pending.length})</h2>
      ${pending.length ? html`<${Table} rows=${pending} kind="approval" ...${props} />` : html`<p>None.</p>`}
      <h2>Queued (${queued.length})</h2>
      ${queued.length ? html`<${Table} rows=${queued} kind="queued" ...${props} />` : html`<p>The queue is empty.</p>`}
      <h2>Running (${active.length})</h2>
      ${active.length ? html`<${Table} rows=${active} kind="active" ...${props} />` : html`<p>Nothing runs.</p>`}`}
  </section>`;
}

function Table({ rows, kind, api, act, now }) {
  return html`<table class="grid">
    <thead><tr>
      <th scope="col">#</th><th scope="col">Request</th><th scope="col">Phase</th>
      <th scope="col">Ask</th><th scope="col">Priority</th>
      <th scope="col">${kind === 'active' ? 'Ends' : 'Planned start'}</th><th scope="col">Actions</th>
    </tr></thead>
    <tbody>${rows.map((g, i) => {
      // The API moves a request before/after another of the same workspace (it adopts that
      // one's priority): the nearest such neighbours in queue order.
      const same = (o) => o.metadata.namespace === g.metadata.namespace;
      const up = kind === 'queued' ? rows.slice(0, i).reverse().find(same) : undefined;
      const down = kind === 'queued' ? rows.slice(i + 1).find(same) : undefined;
      return html`<${Row} key=${`${g.metadata.namespace}/${g.metadata.name}`} g=${g} kind=${kind}
        api=${api} act=${act} now=${now} up=${up} down=${down} />`;
    })}</tbody>
  </table>`;
}

function Row({ g, kind, api, act, now, up, down }) {
  const { metadata: m, spec, status: s } = g;
  const [prio, setPrio] = useState(String(spec.priority ?? ''));
  const [reason, setReason] = useState('');
  const [impact, setImpact] = useState(null);  // {shifts, start} or {error}
  const id = `adm-${m.namespace}-${m.name}`;
  const path = gprPath(m.namespace, m.name);
  const label = `${m.namespace}/${m.name}`;
  return html`<tr data-testid="queue-row" data-name=${m.name}>
    <td class="num">${s.queuePosition ?? '–'}</td>
    <th scope="row">${label}</th>
    <td><${Phase} phase=${s.phase} />${s.reason ? html`<div class="muted">${s.reason}${s.message ? `: ${s.message}` : ''}</div>` : ''}</td>
    <td>${spec.nodes} × ${s.shape || s.plannedShape || spec.shape || (spec.shapes || []).join(' | ')} for ${spec.duration}</td>
    <td>${spec.priority}</td>
    <td>${kind === 'active' ? when(s.endTime, now) : when(s.plannedStart, now)}</td>
    <td class="actions">
      ${kind === 'approval' ? html`
        <button type="button" aria-expanded=${impact != null} onClick=${async () => {
          try {
            setImpact(await api.post(`${path}/whatif`, { change: 'approve' }));
          } catch (e) {
            setImpact({ error: e.message });
          }
        }}>Approve ${m.name}…</button>
        <label for=${`${id}-reason`}>Reason</label>
        <input id=${`${id}-reason`} class="short" type="text" value=${reason} onInput=${(e) => setReason(e.currentTarget.value)} />
        <button type="button" class="danger" disabled=${!reason.trim()}
          onClick=${() => act(`Reject ${label}`, () => api.post(`${path}/reject`, { reason: reason.trim() }))}>Reject ${m.name}</button>
        ${impact ? html`<${ApproveImpact} name=${m.name} impact=${impact} now=${now}
          cancel=${() => setImpact(null)}
          confirm=${() => act(`Approve ${label}`, async () => {
            setImpact(null);
            await api.post(`${path}/approve`, {});
          })} />` : ''}` : ''}
      ${kind !== 'active' ? html`
        <label for=${`${id}-prio`}>Priority</label>
        <input id=${`${id}-prio`} class="short" type="number" value=${prio} onInput=${(e) => setPrio(e.currentTarget.value)} />
        <button type="button" disabled=${prio === '' || Number(prio) === spec.priority}
          onClick=${() => act(`Priority of ${label}`, () => api.post(`${path}/reprioritize`, { priority: Number(prio) }))}>Set priority</button>
        ${up ? html`<button type="button"
          onClick=${() => act(`Move ${label}`, () => api.post(`${path}/move`, { before: up.metadata.name }))}>Move ${m.name} before ${up.metadata.name}</button>` : ''}
        ${down ? html`<button type="button"
          onClick=${() => act(`Move ${label}`, () => api.post(`${path}/move`, { after: down.metadata.name }))}>Move ${m.name} after ${down.metadata.name}</button>` : ''}` : html`
        ${s.phase === 'Active' ? html`<button type="button" class="danger" onClick=${() => act(`Release ${label}`, () => api.post(`${path}/release`, {}))}>Release ${m.name}</button>` : ''}
        <label for=${`${id}-evict`}>Eviction reason</label>
        <input id=${`${id}-evict`} class="short" type="text" value=${reason} onInput=${(e) => setReason(e.currentTarget.value)} />
        <button type="button" class="danger" disabled=${!reason.trim()}
          onClick=${() => act(`Evict ${label}`, () => api.post(`${path}/evict`, { reason: reason.trim() }))}>Evict ${m.name}</button>`}
    </td>
  </tr>`;
}

// The approve confirmation: the request's own planned start and every queued request whose
// planned start would move, then Confirm or Cancel.
function ApproveImpact({ name, impact, now, confirm, cancel }) {
  if (impact.error) {
    return html`<div class="impact" role="alert">Impact of approving ${name}: ${impact.error}
      <button type="button" onClick=${cancel}>Close</button></div>`;
  }
  const lines = impactLines(impact, now);
  return html`<div class="impact" role="group" aria-label=${`Impact of approving ${name}`} data-testid="approve-impact">
    <p>${`${name} would start ${impact.start ? when(impact.start, now) : 'without a plan (it fits nowhere now)'}. ${
      lines.length ? `${lines.length} queued request${lines.length === 1 ? '' : 's'} would move:` : 'No queued request moves.'}`}</p>
    ${lines.length ? html`<ul class="plain">${lines.map((l) => html`<li data-testid="impact-shift">${l}</li>`)}</ul>` : ''}
    <button type="button" onClick=${confirm}>Confirm approval of ${name}</button>
    <button type="button" onClick=${cancel}>Cancel</button>
  </div>`;
}

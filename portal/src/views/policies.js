// Admin: workspaces and their policies. Each workspace's main limits are edited in a form and
// saved as a merge patch of spec.policy (the server validates and names a bad field).
import { useState } from 'preact/hooks';

import { html } from '../html.js';
import { API } from '../api.js';
import { ErrorBox, usePoll } from '../components.js';
import { parseDuration } from '../format.js';
import { myWorkspaces, policyInWords } from './workspaces.js';

// [field, label, kind]: kind 'int', 'dur' (Go duration) or 'bool'.
export const POLICY_FIELDS = [
  ['gpuQuota', 'GPU quota', 'int'],
  ['maxNodesPerRequest', 'Max nodes per request', 'int'],
  ['maxActiveRequests', 'Max requests at once', 'int'],
  ['maxDuration', 'Max duration', 'dur'],
  ['minPriority', 'Min priority', 'int'],
  ['maxPriority', 'Max priority', 'int'],
  ['idleTimeout', 'Idle timeout', 'dur'],
  ['preemptible', 'Preemptible', 'bool'],
  ['mayBurst', 'May burst', 'bool'],
];

// The merge patch for the fields that changed; {error} when a value does not parse.
export function policyPatch(policy, form) {
  const out = {};
  for (const [field, label, kind] of POLICY_FIELDS) {
    const v = form[field];
    if (kind === 'bool') {
      if (Boolean(policy[field]) !== v) out[field] = v;
    } else if (kind === 'int') {
      if (v === '' && policy[field] == null) continue;
      if (!/^-?\d+$/.test(String(v).trim())) return { error: `${label}: a whole number` };
      if (Number(v) !== policy[field]) out[field] = Number(v);
    } else {
      if (v === '' && !policy[field]) continue;
      if (parseDuration(v) == null) return { error: `${label}: a duration such as 30m or 24h` };
      if (v !== policy[field]) out[field] = v.trim();
    }
  }
  return { patch: out };
}

export function Policies({ session }) {
  const { api, me } = session;
  const [notice, setNotice] = useState('');
  const { data, error, reload } = usePoll(() => api.get(`${API}/workspaces`), 0);
  const items = data ? myWorkspaces(data.items || [], me) : null;
  return html`<section aria-labelledby="pol-h">
    <h1 id="pol-h">Workspaces and policies</h1>
    <${ErrorBox} error=${error} />
    ${notice ? html`<p class="notice" role="status" data-testid="policy-notice">${notice}</p>` : ''}
    ${items == null ? html`<p role="status">Loading…</p>` : html`<div class="cards">
      ${items.map((w) => html`<${PolicyCard} key=${`${w.metadata.name}/${w.metadata.resourceVersion}`} w=${w} api=${api}
        saved=${(msg) => { setNotice(msg); reload(); }} />`)}
    </div>`}
  </section>`;
}

function PolicyCard({ w, api, saved }) {
  const name = w.metadata.name;
  const policy = w.spec.policy || {};
  const [form, setForm] = useState(() => Object.fromEntries(POLICY_FIELDS.map(([f, , k]) => [f, k === 'bool' ? Boolean(policy[f]) : policy[f] == null ? '' : String(policy[f])])));
  const [err, setErr] = useState('');
  const save = async (e) => {
    e.preventDefault();
    const { patch, error } = policyPatch(policy, form);
    if (error) return setErr(error);
    if (!Object.keys(patch).length) return setErr('Nothing changed.');
    try {
      await api.patch(`${API}/workspaces/${encodeURIComponent(name)}`, { spec: { policy: patch } });
      setErr('');
      saved(`Policy of ${name} saved.`);
    } catch (x) {
      setErr(x.message);
    }
  };
  const id = `pol-${name}`;
  return html`<article class="card" aria-labelledby=${id}>
    <h2 id=${id}>${name}</h2>
    <p class="muted">project ${w.spec.project || '–'}; ${(w.spec.members || []).length} members</p>
    <ul class="policy">${policyInWords(policy).map((s) => html`<li>${s}</li>`)}</ul>
    <form class="policy-form" onSubmit=${save} aria-label=${`Policy of ${name}`}>
      ${POLICY_FIELDS.map(([f, label, kind]) => kind === 'bool'
        ? html`<label class="check"><input type="checkbox" checked=${form[f]} onChange=${(e) => setForm({ ...form, [f]: e.currentTarget.checked })} /> ${label}</label>`
        : html`<label for=${`${id}-${f}`}>${label}</label>
          <input id=${`${id}-${f}`} class="short" type="text" inputmode=${kind === 'int' ? 'numeric' : 'text'} value=${form[f]}
            onInput=${(e) => setForm({ ...form, [f]: e.currentTarget.value })} />`)}
      <button type="submit">Save policy of ${name}</button>
    </form>
    ${err ? html`<p class="error" role="alert">${err}</p>` : ''}
  </article>`;
}

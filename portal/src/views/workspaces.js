// My workspaces: members, GPU quota used/free, and the policy in plain words.
import { useState } from 'preact/hooks';
import { html } from '../html.js';
import { API } from '../api.js';
import { ErrorBox, usePoll } from '../components.js';
import { duration, parseDuration } from '../format.js';

// The workspaces this user works in: a member's own, everybody else's for admins and viewers.
export function myWorkspaces(items, me) {
  if (me.role === 'member') return items.filter((w) => me.workspaces.includes(w.metadata.name));
  if (me.role === 'project-admin') return items.filter((w) => me.projects.includes(w.spec.project));
  return items;
}

function dur(text) {
  const s = parseDuration(text);
  return s == null ? text : duration(s);
}

function list(items, none) {
  return items && items.length ? items.join(', ') : none;
}

// The policy as sentences a user reads at a glance.
export function policyInWords(p = {}) {
  const out = [];
  // No quota (absent or null) is no limit; a quota of 0 allows no GPUs at all.
  if (p.gpuQuota == null) out.push('No GPU quota set.');
  else if (p.gpuQuota === 0) out.push('GPU quota 0: no GPUs may be in use.');
  else out.push(`Up to ${p.gpuQuota} GPUs in use at once.`);
  out.push(`Shapes: ${list(p.allowedShapes, 'any')}; clusters: ${list(p.allowedClusters, 'any')}.`);
  const limits = [];
  if (p.maxNodesPerRequest) limits.push(`at most ${p.maxNodesPerRequest} nodes`);
  if (p.maxDuration) limits.push(`for at most ${dur(p.maxDuration)}`);
  if (limits.length) out.push(`A request may ask ${limits.join(' ')}.`);
  const active = p.maxActiveRequests || 1;
  out.push(`${active} request${active === 1 ? '' : 's'} may run at once.`);
  if (p.minPriority != null || p.maxPriority != null) {
    out.push(`Priority from ${p.minPriority ?? 0} to ${p.maxPriority ?? '∞'}; outside policy needs an admin's approval.`);
  }
  if (p.idleTimeout) out.push(`GPUs idle for ${dur(p.idleTimeout)} are released.`);
  out.push(p.preemptible ? 'Requests may be preempted by higher priorities.' : 'Requests are never preempted.');
  if (p.mayBurst) out.push('May burst to other clusters.');
  return out;
}

// Who may download a kubeconfig for which member of workspace `w`: an admin for any member, a
// member for itself (what the server allows too). An empty list: no button.
export function kubeconfigMembers(w, me) {
  const members = (w.spec.members || []).map((m) => m.user);
  if (me.role === 'admin') return members;
  if (me.workspaces.includes(w.metadata.name) && members.includes(me.user)) return [me.user];
  return [];
}

// Hands `text` to the browser as a file download named `name`.
export function saveText(name, text, doc = document) {
  const url = URL.createObjectURL(new Blob([text], { type: 'application/yaml' }));
  const a = doc.createElement('a');
  a.href = url;
  a.download = name;
  doc.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 0);
}

// A member's kubeconfig for the workspace's namespaces on a Kubernetes cluster of egsd (a token
// of the member's service account). The server says when there is no such cluster.
function Kubeconfig({ session, workspace }) {
  const ws = workspace.metadata.name;
  const members = kubeconfigMembers(workspace, session.me);
  const [member, setMember] = useState(members[0] || '');
  const [state, setState] = useState({ busy: false, error: null, done: '' });
  if (members.length === 0) return null;
  async function download() {
    setState({ busy: true, error: null, done: '' });
    try {
      const q = `member=${encodeURIComponent(member)}&format=json`;
      const r = await session.api.get(`${API}/workspaces/${encodeURIComponent(ws)}/kubeconfig?${q}`);
      saveText(`${ws}-${member}.kubeconfig`, r.kubeconfig || '');
      setState({ busy: false, error: null, done: `Kubeconfig for ${member}: cluster ${r.cluster}, namespace ${r.namespace}.` });
    } catch (e) {
      setState({ busy: false, error: e, done: '' });
    }
  }
  const id = `kc-${ws}`;
  return html`<div class="kubeconfig">
    <h3>Cluster access</h3>
    ${members.length > 1
      ? html`<label for=${id}>Member </label>
          <select id=${id} value=${member} onChange=${(e) => setMember(e.target.value)}>
            ${members.map((m) => html`<option value=${m}>${m}</option>`)}
          </select> `
      : ''}
    <button type="button" disabled=${state.busy} onClick=${download}>Download kubeconfig</button>
    ${state.done ? html`<p role="status">${state.done}</p>` : ''}
    <${ErrorBox} error=${state.error} />
  </div>`;
}

// `quota` null: no limit, no bar; 0: a full bar (no GPU may be used).
function QuotaBar({ used, quota }) {
  if (quota == null) return html`<span>${used} GPUs in use</span>`;
  const pct = quota > 0 ? Math.min(100, Math.round((100 * used) / quota)) : 100;
  return html`<div class="quota">
    <progress max=${Math.max(1, quota)} value=${quota > 0 ? used : 1} aria-label=${`Quota: ${used} of ${quota} GPUs used`}></progress>
    <span>${used} of ${quota} GPUs used, ${Math.max(0, quota - used)} free (${pct}%)</span>
  </div>`;
}

export function Workspaces({ session }) {
  const { data, error } = usePoll(() => session.api.get(`${API}/workspaces`), 5000);
  const items = data ? myWorkspaces(data.items || [], session.me) : null;
  return html`<section aria-labelledby="ws-h">
    <h1 id="ws-h">My workspaces</h1>
    <${ErrorBox} error=${error} />
    ${items == null
      ? html`<p role="status">Loading…</p>`
      : items.length === 0
        ? html`<p>You are in no workspace.</p>`
        : html`<div class="cards">
            ${items.map((w) => {
              const p = w.spec.policy || {};
              const st = w.status || {};
              return html`<article class="card" aria-labelledby=${`ws-${w.metadata.name}`}>
                <h2 id=${`ws-${w.metadata.name}`}>${w.metadata.name}</h2>
                <p class="muted">project ${w.spec.project || '–'}; namespaces
                  ${list(w.spec.namespaces, w.metadata.name)}</p>
                <${QuotaBar} used=${st.gpusInUse || 0} quota=${p.gpuQuota ?? null} />
                <p>${st.activeRequests || 0} active request${st.activeRequests === 1 ? '' : 's'}.</p>
                <h3>Policy</h3>
                <ul class="policy">${policyInWords(p).map((s) => html`<li>${s}</li>`)}</ul>
                <h3>Members</h3>
                <ul class="members">
                  ${(w.spec.members || []).map((m) => html`<li>${m.user} <span class="muted">(${m.role})</span></li>`)}
                </ul>
                <${Kubeconfig} session=${session} workspace=${w} />
              </article>`;
            })}
          </div>`}
  </section>`;
}

// My workspaces: members, GPU quota used/free, and the policy in plain words.
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
  out.push(p.gpuQuota ? `Up to ${p.gpuQuota} GPUs in use at once.` : 'No GPU quota set.');
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

function QuotaBar({ used, quota }) {
  if (!quota) return html`<span>${used} GPUs in use</span>`;
  const pct = Math.min(100, Math.round((100 * used) / quota));
  return html`<div class="quota">
    <progress max=${quota} value=${used} aria-label=${`Quota: ${used} of ${quota} GPUs used`}></progress>
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
                <${QuotaBar} used=${st.gpusInUse || 0} quota=${p.gpuQuota || 0} />
                <p>${st.activeRequests || 0} active request${st.activeRequests === 1 ? '' : 's'}.</p>
                <h3>Policy</h3>
                <ul class="policy">${policyInWords(p).map((s) => html`<li>${s}</li>`)}</ul>
                <h3>Members</h3>
                <ul class="members">
                  ${(w.spec.members || []).map((m) => html`<li>${m.user} <span class="muted">(${m.role})</span></li>`)}
                </ul>
              </article>`;
            })}
          </div>`}
  </section>`;
}

// Admin: the audit log (every mutating API call: who, what, the answer) and the scheduler's
// decision log (approve/hold/start/preempt/extend... with the queue keys it was based on), from
// GET /logs/{audit|decisions}. The logs are read oldest first in pages of 500; the page shows the
// newest first, filtered by a search.
import { useEffect, useState } from 'preact/hooks';

import { html } from '../html.js';
import { API } from '../api.js';
import { ErrorBox, useNow } from '../components.js';
import { when } from '../format.js';

const PAGE = 500;
const MAX_READ = 20000;

// Every record of `stream` (up to MAX_READ, the newest kept), following `next`.
export async function readLog(api, stream, after = 0, filter = '') {
  const items = [];
  let next = after;
  for (;;) {
    const q = new URLSearchParams({ after: String(next), limit: String(PAGE) });
    if (filter) q.set('request', filter);
    const page = await api.get(`${API}/logs/${stream}?${q}`);
    const got = page.items || [];
    items.push(...got);
    if (items.length > MAX_READ) items.splice(0, items.length - MAX_READ);
    if (got.length < PAGE || page.next === next) return { items, next: page.next };
    next = page.next;
  }
}

function matches(rec, words) {
  if (!words.length) return true;
  const text = JSON.stringify(rec.record).toLowerCase();
  return words.every((w) => text.includes(w));
}

export function LogView({ session, stream }) {
  const { api } = session;
  const now = useNow(10000);
  const [state, setState] = useState({ items: null, next: 0, error: null });
  const [q, setQ] = useState('');
  const load = async (after, old) => {
    try {
      const { items, next } = await readLog(api, stream, after);
      setState({ items: [...(old || []), ...items], next, error: null });
    } catch (error) {
      setState((s) => ({ ...s, error }));
    }
  };
  useEffect(() => { load(0, null); }, [stream]);
  const words = q.toLowerCase().split(/\s+/).filter(Boolean);
  const rows = state.items ? state.items.filter((r) => matches(r, words)).reverse() : null;
  const title = stream === 'audit' ? 'Audit log' : 'Decision log';
  return html`<section aria-labelledby="log-h">
    <h1 id="log-h">${title}</h1>
    <div class="toolbar" role="search">
      <label for="log-q">Search</label>
      <input id="log-q" type="search" value=${q} placeholder=${stream === 'audit' ? 'user, verb, resource, name…' : 'request, kind, workspace…'}
        onInput=${(e) => setQ(e.currentTarget.value)} />
      <button type="button" onClick=${() => load(state.next, state.items)}>Load newer</button>
    </div>
    <${ErrorBox} error=${state.error} />
    ${rows == null ? html`<p role="status">Loading…</p>` : html`
      <p class="muted" role="status">${rows.length} record${rows.length === 1 ? '' : 's'}${rows.length > 300 ? ', newest 300 shown' : ''}.</p>
      <table class="grid" data-testid=${`log-${stream}`}>
        ${stream === 'audit' ? html`
          <thead><tr><th scope="col">#</th><th scope="col">When</th><th scope="col">User</th><th scope="col">Verb</th>
            <th scope="col">Object</th><th scope="col">Answer</th></tr></thead>
          <tbody>${rows.slice(0, 300).map((r) => {
            const a = r.record || {};
            return html`<tr data-testid="log-row" class=${a.code >= 400 ? 'warning' : ''}><td class="num">${r.seq}</td><td>${when(r.time, now)}</td>
              <td>${a.user}</td><td>${a.verb}${a.dryRun ? ' (dry run)' : ''}</td>
              <td>${a.resource}${a.namespace ? ` ${a.namespace}/` : ' '}${a.name || ''}</td>
              <td>${a.code}${a.reason ? ` ${a.reason}` : ''}${a.message ? html`<div class="muted">${a.message}</div>` : ''}</td></tr>`;
          })}</tbody>` : html`
          <thead><tr><th scope="col">#</th><th scope="col">When</th><th scope="col">Decision</th><th scope="col">Request</th>
            <th scope="col">Priority</th><th scope="col">Rank</th><th scope="col">Waiting ahead</th><th scope="col">Basis</th></tr></thead>
          <tbody>${rows.slice(0, 300).map((r) => {
            const d = r.record || {};
            return html`<tr data-testid="log-row"><td class="num">${r.seq}</td><td>${when(r.time, now)}</td><td>${d.kind}</td>
              <td>${d.request || d.requestId}</td><td class="num">${d.priority}</td><td class="num">${d.rank}</td>
              <td class="num">${d.waitingAhead}</td><td>${d.basis}${d.nodes ? html`<div class="muted">nodes ${d.nodes.join(', ')}</div>` : ''}</td></tr>`;
          })}</tbody>`}
      </table>`}
  </section>`;
}

export const AuditLog = ({ session }) => html`<${LogView} session=${session} stream="audit" />`;
export const DecisionLog = ({ session }) => html`<${LogView} session=${session} stream="decisions" />`;

// Events: what happened to requests and nodes (Kubernetes-style core/v1 Events), newest first,
// live (a list, then a watch stream from its resourceVersion; the stream is re-opened after a
// relist when it ends or fails), searchable and filterable by type.
import { useEffect, useState } from 'preact/hooks';

import { html } from '../html.js';
import { API } from '../api.js';
import { ErrorBox, useNow } from '../components.js';
import { parseTime, when } from '../format.js';

const MAX_SHOWN = 200;

// The paths whose events a user reads: all events, or each of a member's workspaces'.
function eventPaths(me) {
  if (me.role !== 'member') return [`${API}/events`];
  return me.workspaces.map((ws) => `${API}/namespaces/${encodeURIComponent(ws)}/events`);
}

const keyOf = (e) => (e.metadata && (e.metadata.uid || `${e.metadata.namespace}/${e.metadata.name}`)) || '';

// Live events: {data, error, live}. One list and one watch per path; events are kept by uid.
export function useLiveEvents(session) {
  const [state, setState] = useState({ data: null, error: null, live: false });
  useEffect(() => {
    const ctl = new AbortController();
    const byKey = new Map();
    let timer = 0;
    let pending = false;
    // Many events can arrive at once: publish at most every 250 ms.
    const publish = () => {
      if (pending) return;
      pending = true;
      timer = setTimeout(() => {
        pending = false;
        if (!ctl.signal.aborted) setState((s) => ({ ...s, data: [...byKey.values()], error: null }));
      }, 250);
    };
    const follow = async (path) => {
      while (!ctl.signal.aborted) {
        try {
          const list = await session.api.get(path);
          for (const e of list.items || []) byKey.set(keyOf(e), e);
          publish();
          setState((s) => ({ ...s, live: true }));
          await session.api.watch(path, list.metadata && list.metadata.resourceVersion, (ev) => {
            if (!ev.object || ev.type === 'BOOKMARK' || ev.type === 'ERROR') return;
            if (ev.type === 'DELETED') byKey.delete(keyOf(ev.object));
            else byKey.set(keyOf(ev.object), ev.object);
            publish();
          }, ctl.signal);
        } catch (error) {
          if (ctl.signal.aborted) return;
          setState((s) => ({ ...s, error, live: false }));
        }
        if (!ctl.signal.aborted) await new Promise((ok) => setTimeout(ok, 2000));
      }
    };
    eventPaths(session.me).forEach(follow);
    return () => {
      ctl.abort();
      clearTimeout(timer);
    };
  }, [session.token]);
  return state;
}

export function lastTime(e) {
  return parseTime(e.lastTimestamp || e.firstTimestamp || (e.metadata && e.metadata.creationTimestamp)) || 0;
}

function matches(e, q) {
  if (!q) return true;
  const o = e.involvedObject || {};
  const text = `${e.type} ${e.reason} ${e.message} ${o.kind} ${o.namespace || ''} ${o.name}`.toLowerCase();
  return q.toLowerCase().split(/\s+/).filter(Boolean).every((w) => text.includes(w));
}

export function Events({ session, events }) {
  const now = useNow(5000);
  const [q, setQ] = useState('');
  const [type, setType] = useState('');
  const { data, error, live } = events;
  const rows = data
    ? data
        .filter((e) => !type || e.type === type)
        .filter((e) => matches(e, q))
        .sort((a, b) => lastTime(b) - lastTime(a))
    : null;
  return html`<section aria-labelledby="ev-h">
    <h1 id="ev-h">Events <span class=${`live${live ? ' on' : ''}`} data-testid="live">${live ? 'live' : 'connecting…'}</span></h1>
    <div class="toolbar" role="search">
      <label for="ev-q">Search</label>
      <input id="ev-q" type="search" value=${q} placeholder="request, node, reason…"
        onInput=${(e) => setQ(e.currentTarget.value)} />
      <label for="ev-type">Type</label>
      <select id="ev-type" value=${type} onChange=${(e) => setType(e.currentTarget.value)}>
        <option value="">all</option>
        <option value="Normal">Normal</option>
        <option value="Warning">Warning</option>
      </select>
    </div>
    <${ErrorBox} error=${error} />
    ${rows == null
      ? html`<p role="status">Loading…</p>`
      : html`<p class="muted" role="status">${rows.length} event${rows.length === 1 ? '' : 's'}${rows.length > MAX_SHOWN ? `, newest ${MAX_SHOWN} shown` : ''}.</p>
        <table class="grid">
          <thead><tr>
            <th scope="col">When</th><th scope="col">Type</th><th scope="col">Reason</th>
            <th scope="col">Object</th><th scope="col">Message</th><th scope="col">Count</th>
          </tr></thead>
          <tbody>
            ${rows.slice(0, MAX_SHOWN).map((e) => {
              const o = e.involvedObject || {};
              return html`<tr data-testid="event" class=${e.type === 'Warning' ? 'warning' : ''}>
                <td>${when(e.lastTimestamp || e.firstTimestamp, now)}</td>
                <td>${e.type}</td>
                <td>${e.reason}</td>
                <td>${o.kind ? `${o.kind} ` : ''}${o.namespace ? `${o.namespace}/` : ''}${o.name}</td>
                <td>${e.message}</td>
                <td class="num">${e.count || 1}</td>
              </tr>`;
            })}
          </tbody>
        </table>`}
  </section>`;
}

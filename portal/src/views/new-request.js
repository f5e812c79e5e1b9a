// Create a request: shape(s), nodes, duration, priority, optional earliest start. "Get wait time"
// asks the quote endpoint for every acceptable shape and cluster (nothing changes on the
// server); the user picks a row and submits a request pinned to that shape and cluster.
import { useEffect, useState } from 'preact/hooks';

import { html } from '../html.js';
import { API, gprPath } from '../api.js';
import { ErrorBox, usePoll } from '../components.js';
import { WAIT_WORDS, duration, money, parseDuration, serverNow, when } from '../format.js';
import { myWorkspaces } from './workspaces.js';

function suggestName(user) {
  const base = String(user || 'req').toLowerCase().replace(/[^a-z0-9-]/g, '-').replace(/^-+|-+$/g, '').slice(0, 40) || 'req';
  return `${base}-${Math.random().toString(36).slice(2, 7)}`;
}

function bestIndex(quote) {
  const b = quote.best;
  if (typeof b === 'number') return b;
  if (b && typeof b === 'object') {
    return quote.options.findIndex((o) => o.shape === b.shape && o.cluster === b.cluster);
  }
  return quote.options.findIndex((o) => o.start || o.startP50);
}

export function NewRequest({ session }) {
  const { api, me } = session;
  const { data, error: loadError } = usePoll(async () => {
    const [ws, shapes] = await Promise.all([api.get(`${API}/workspaces`), api.get(`${API}/gpushapes`)]);
    return { workspaces: myWorkspaces(ws.items || [], me), shapes: shapes.items || [] };
  }, 0);
  const [wsName, setWsName] = useState('');
  const [shapes, setShapes] = useState([]);
  const [nodes, setNodes] = useState(1);
  const [dur, setDur] = useState('2h');
  const [priority, setPriority] = useState('');
  const [earliest, setEarliest] = useState('');
  const [name, setName] = useState(() => suggestName(me.user));
  const [quote, setQuote] = useState(null);
  const [pick, setPick] = useState(-1);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState(null);

  const ws = data && data.workspaces.find((w) => w.metadata.name === wsName);
  const policy = (ws && ws.spec.policy) || {};
  const allowed = data
    ? data.shapes.map((s) => s.metadata.name).filter((s) => !(policy.allowedShapes || []).length || policy.allowedShapes.includes(s))
    : [];

  // Defaults when the workspaces arrive or the workspace changes.
  useEffect(() => {
    if (data && !wsName && data.workspaces.length) setWsName(data.workspaces[0].metadata.name);
  }, [data]);
  useEffect(() => {
    setShapes(allowed);
    setPriority(policy.minPriority != null ? String(policy.minPriority) : '');
    setQuote(null);
  }, [wsName, data]);

  const spec = () => {
    const s = { shapes, nodes: Number(nodes), duration: dur.trim() };
    if (priority !== '') s.priority = Number(priority);
    if (earliest) s.earliestStart = new Date(`${earliest}:00Z`).toISOString().replace(/\.\d{3}Z$/, 'Z');
    return s;
  };
  const invalid = !wsName
    ? 'Choose a workspace.'
    : shapes.length === 0
      ? 'Choose at least one shape.'
      : !(Number(nodes) >= 1)
        ? 'Nodes must be at least 1.'
        : parseDuration(dur) == null
          ? 'Duration looks like 90m, 4h or 1h30m.'
          : '';

  const getQuote = async (e) => {
    e.preventDefault();
    setError(null);
    setDone(null);
    setBusy(true);
    try {
      const q = await api.post(`${API}/namespaces/${encodeURIComponent(wsName)}/quotes`, {
        apiVersion: 'egs.dev/v1alpha1',
        kind: 'Quote',
        spec: spec(),
      });
      q.options = q.options || [];
      setQuote(q);
      setPick(bestIndex(q));
    } catch (err) {
      setError(err);
      setQuote(null);
    } finally {
      setBusy(false);
    }
  };

  const submit = async () => {
    const o = quote && quote.options[pick];
    if (!o) return;
    setError(null);
    setBusy(true);
    try {
      const body = {
        apiVersion: 'egs.dev/v1alpha1',
        kind: 'GPUProvisionRequest',
        metadata: { name: name.trim(), namespace: wsName },
        spec: { ...spec(), shapes: [o.shape], clusters: [o.cluster] },
      };
      const created = await api.post(gprPath(wsName), body);
      setDone(created);
      setQuote(null);
      setName(suggestName(me.user));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  if (loadError) return html`<${ErrorBox} error=${loadError} />`;
  if (!data) return html`<p role="status">Loading…</p>`;
  if (!data.workspaces.length) return html`<p>You are in no workspace, so you cannot ask for GPUs yet.</p>`;

  const edit = (setter) => (e) => {
    setter(e.currentTarget.value);
    setQuote(null);
  };
  const toggleShape = (s) => (e) => {
    setShapes(e.currentTarget.checked ? [...shapes, s] : shapes.filter((x) => x !== s));
    setQuote(null);
  };

  return html`<section aria-labelledby="new-h">
    <h1 id="new-h">New request</h1>
    <form class="form" onSubmit=${getQuote}>
      <div class="field">
        <label for="nr-ws">Workspace</label>
        <select id="nr-ws" value=${wsName} onChange=${edit(setWsName)}>
          ${data.workspaces.map((w) => html`<option value=${w.metadata.name}>${w.metadata.name}</option>`)}
        </select>
      </div>
      <fieldset class="field">
        <legend>Acceptable shapes</legend>
        ${allowed.map(
          (s) => html`<label class="check"><input type="checkbox" name="shape" value=${s}
            checked=${shapes.includes(s)} onChange=${toggleShape(s)} /> ${s}</label>`,
        )}
      </fieldset>
      <div class="field">
        <label for="nr-nodes">Nodes</label>
        <input id="nr-nodes" type="number" min="1" value=${nodes} onInput=${edit(setNodes)}
          aria-describedby=${policy.maxNodesPerRequest ? 'nr-nodes-help' : undefined} />
        ${policy.maxNodesPerRequest ? html`<span id="nr-nodes-help" class="muted">at most ${policy.maxNodesPerRequest} without approval</span>` : ''}
      </div>
      <div class="field">
        <label for="nr-dur">Duration</label>
        <input id="nr-dur" type="text" value=${dur} onInput=${edit(setDur)} aria-describedby="nr-dur-help" />
        <span id="nr-dur-help" class="muted">e.g. 90m, 4h, 1h30m${policy.maxDuration ? `; at most ${policy.maxDuration} without approval` : ''}</span>
      </div>
      <div class="field">
        <label for="nr-prio">Priority</label>
        <input id="nr-prio" type="number" value=${priority} onInput=${edit(setPriority)} aria-describedby="nr-prio-help" />
        <span id="nr-prio-help" class="muted">higher runs first${policy.maxPriority != null ? `; ${policy.minPriority ?? 0}–${policy.maxPriority} without approval` : ''}</span>
      </div>
      <div class="field">
        <label for="nr-earliest">Earliest start (UTC, optional)</label>
        <input id="nr-earliest" type="datetime-local" value=${earliest} onInput=${edit(setEarliest)} />
      </div>
      <div class="actions">
        <button type="submit" disabled=${busy || !!invalid}>Get wait time</button>
        ${invalid ? html`<span class="muted" role="status">${invalid}</span>` : ''}
      </div>
    </form>
    <${ErrorBox} error=${error} />
    ${done ? html`<p class="ok" role="status" data-testid="submitted">Submitted
      <a href="#/requests">${done.metadata.name}</a>: ${(done.status && done.status.phase) || 'accepted'}${done.status && done.status.promisedStart ? `, promised start ${when(done.status.promisedStart)}` : ''}.</p>` : ''}
    ${quote ? html`<${QuoteTable} quote=${quote} pick=${pick} setPick=${setPick} />
      ${quote.options.length
        ? html`<div class="form submit-row">
            <div class="field">
              <label for="nr-name">Request name</label>
              <input id="nr-name" type="text" value=${name} onInput=${(e) => setName(e.currentTarget.value)}
                pattern="[a-z0-9]([-a-z0-9]*[a-z0-9])?" maxlength="63" />
            </div>
            <button type="button" class="primary" onClick=${submit} disabled=${busy || pick < 0 || !name.trim()}>
              Submit request${quote.options[pick] ? ` on ${quote.options[pick].shape} in ${quote.options[pick].cluster}` : ''}
            </button>
          </div>`
        : ''}` : ''}
  </section>`;
}

function QuoteTable({ quote, pick, setPick }) {
  if (!quote.options.length) return html`<p role="status">No allowed shape and cluster can run this request.</p>`;
  const now = serverNow();
  return html`<div class="quote" aria-live="polite">
    <h2 id="quote-h">Wait time</h2>
    <p>
      ${quote.queuePosition != null ? html`Queue position if submitted now: <strong>${quote.queuePosition}</strong>. ` : ''}
      ${quote.needsApproval ? html`<strong>Needs approval:</strong> this request is outside the workspace policy.` : ''}
    </p>
    <table class="grid" aria-labelledby="quote-h">
      <thead><tr>
        <th scope="col">Pick</th><th scope="col">Shape</th><th scope="col">Cluster</th>
        <th scope="col">Start (P50)</th><th scope="col">Start (P90)</th><th scope="col">Wait</th>
        <th scope="col">Price</th><th scope="col">Why</th>
      </tr></thead>
      <tbody>
        ${quote.options.map((o, i) => {
          const start = o.startP50 || o.start;
          const id = `q-${i}`;
          return html`<tr class=${i === pick ? 'picked' : ''}>
            <td><input type="radio" name="quote-option" id=${id} checked=${i === pick} disabled=${!start}
              onChange=${() => setPick(i)} aria-label=${`Pick ${o.shape} in ${o.cluster}`} /></td>
            <th scope="row"><label for=${id}>${o.shape}</label></th>
            <td>${o.cluster}</td>
            <td>${start ? when(start, now) : 'never'}</td>
            <td>${o.startP90 ? when(o.startP90, now) : '–'}</td>
            <td>${typeof o.waitSeconds === 'number' ? duration(o.waitSeconds) : '–'}</td>
            <td class="num">${money(o.price)}</td>
            <td>${[WAIT_WORDS[o.cause] || o.cause, o.reason].filter(Boolean).join(': ') || '–'}</td>
          </tr>`;
        })}
      </tbody>
    </table>
  </div>`;
}

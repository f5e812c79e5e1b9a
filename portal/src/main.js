// The portal's shell: sign-in, header (who and which role), navigation by URL hash, and the views.
// The token lives in sessionStorage only (gone when the tab closes).
import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';

import { client, whoAmI } from './api.js';
import { serverNow } from './format.js';
import { html } from './html.js';
import { SignIn } from './views/signin.js';
import { Workspaces } from './views/workspaces.js';
import { Inventory } from './views/inventory.js';
import { NewRequest } from './views/new-request.js';
import { Requests } from './views/requests.js';
import { Queue } from './views/queue.js';
import { Events, lastTime, useLiveEvents } from './views/events.js';
import { Schedule } from './views/schedule.js';
import { Dashboard } from './views/dashboard.js';
import { Fleet } from './views/fleet.js';
import { Policies } from './views/policies.js';
import { Ledger } from './views/ledger.js';
import { AuditLog, DecisionLog } from './views/logs.js';
import { Gpus } from './views/gpus.js';

const TOKEN_KEY = 'egs.token';

const ROUTES = [
  { path: 'requests', label: 'My requests', view: Requests },
  { path: 'new', label: 'New request', view: NewRequest, writes: true },
  { path: 'workspaces', label: 'Workspaces', view: Workspaces },
  { path: 'inventory', label: 'Inventory', view: Inventory },
  { path: 'gpus', label: 'GPUs', view: Gpus },
  { path: 'events', label: 'Events', view: Events, bell: true },
  { path: 'dashboard', label: 'Dashboard', view: Dashboard, admin: true },
  { path: 'queue', label: 'Queue (admin)', view: Queue, admin: true },
  { path: 'schedule', label: 'Schedule', view: Schedule, admin: true },
  { path: 'fleet', label: 'Fleet', view: Fleet, admin: true },
  { path: 'policies', label: 'Policies', view: Policies, admin: true },
  { path: 'ledger', label: 'Promise ledger', view: Ledger, admin: true },
  { path: 'audit', label: 'Audit log', view: AuditLog, admin: true, full: true },
  { path: 'decisions', label: 'Decisions', view: DecisionLog, admin: true, full: true },
];

function currentRoute() {
  const p = (location.hash || '').replace(/^#\/?/, '').split('?')[0];
  return ROUTES.find((r) => r.path === p) ? p : 'requests';
}

export function isAdmin(me) {
  return me && (me.role === 'admin' || me.role === 'project-admin');
}

// The bell: warnings of the last hour, live; leads to the events page.
function Bell({ events, current }) {
  const { data } = events;
  const hourAgo = serverNow() - 3600e3;
  const warnings = (data || []).filter((e) => e.type === 'Warning' && lastTime(e) >= hourAgo).length;
  const label = `${warnings} warning${warnings === 1 ? '' : 's'} in the last hour`;
  return html`<a class=${`bell${warnings ? ' hot' : ''}`} href="#/events" title=${label}
    aria-current=${current ? 'page' : undefined}>
    <svg width="16" height="16" viewBox="0 0 24 24" aria-hidden="true" focusable="false">
      <path fill="currentColor" d="M12 22a2 2 0 0 0 2-2h-4a2 2 0 0 0 2 2zm6-6v-5c0-3.07-1.64-5.64-4.5-6.32V4a1.5 1.5 0 0 0-3 0v.68C7.63 5.36 6 7.92 6 11v5l-2 2v1h16v-1l-2-2z" />
    </svg>
    <span>Events</span>
    ${warnings ? html`<span class="count" aria-hidden="true">${warnings}</span>` : ''}
    <span class="sr-only">: ${warnings} warning${warnings === 1 ? '' : 's'} in the last hour</span>
  </a>`;
}

function App() {
  const [token, setToken] = useState(() => sessionStorage.getItem(TOKEN_KEY) || '');
  const [me, setMe] = useState(null);
  const [route, setRoute] = useState(currentRoute());
  const [error, setError] = useState('');

  const signOut = useCallback(() => {
    sessionStorage.removeItem(TOKEN_KEY);
    setToken('');
    setMe(null);
  }, []);
  // The server answered 401 mid-session: say why the sign-in form is back.
  const tokenRefused = useCallback(() => {
    setError('Signed out: the server no longer accepts this token (expired or revoked).');
    signOut();
  }, []);

  useEffect(() => {
    const onHash = () => setRoute(currentRoute());
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);

  // A token from an earlier page load in this tab: find out whose it is again.
  useEffect(() => {
    if (!token || me) return;
    whoAmI(token)
      .then(setMe)
      .catch((e) => {
        setError(`Signed out: ${e.message}`);
        signOut();
      });
  }, [token]);

  const signIn = async (t) => {
    const who = await whoAmI(t); // throws ApiError on a bad token
    // A node token is an agent's: the portal has nothing it may do (every page answered 403).
    if (who.role === 'node') {
      throw new Error('this is a node token (for egs-agent): sign in with a user token');
    }
    sessionStorage.setItem(TOKEN_KEY, t);
    setError('');
    setToken(t);
    setMe(who);
    location.hash = '#/requests';
  };

  if (!token || !me) {
    if (token && !me) return html`<p class="loading" role="status">Signing in…</p>`;
    return html`<${SignIn} onSignIn=${signIn} notice=${error} />`;
  }

  return html`<${Shell} token=${token} me=${me} route=${route} signOut=${signOut} tokenRefused=${tokenRefused} />`;
}

// The signed-in portal: header, navigation and the current view. One live events stream feeds
// the bell and the events page.
function Shell({ token, me, route, signOut, tokenRefused }) {
  const api = client(token, tokenRefused);
  const session = { api, me, token };
  const events = useLiveEvents(session);
  // Viewers read only: no new requests; the queue's actions are for admins.
  // The logs are for full admins only (the server refuses project admins).
  const routes = ROUTES.filter((r) => (!r.admin || isAdmin(me)) && (!r.full || me.role === 'admin') && (!r.writes || me.role !== 'viewer'));
  const navRoutes = routes.filter((r) => !r.bell && !r.admin);
  const adminRoutes = routes.filter((r) => r.admin);
  const active = routes.find((r) => r.path === route) || routes[0];
  const View = active.view;
  return html`
    <header class="top">
      <a class="skip" href="#main">Skip to content</a>
      <span class="brand">EGS</span>
      <nav aria-label="Main">
        <ul>
          ${navRoutes.map(
            (r) => html`<li>
              <a href=${`#/${r.path}`} aria-current=${r === active ? 'page' : undefined}
                >${r.label}</a
              >
            </li>`,
          )}
        </ul>
      </nav>
      <${Bell} events=${events} current=${active.path === 'events'} />
      <div class="who" data-testid="who">
        Signed in as <strong>${me.user}</strong>
        <span class="role" title="role">${me.role}</span>
        ${me.workspaces.length ? html`<span class="scope">(${me.workspaces.join(', ')})</span>` : ''}
        <button type="button" class="link" onClick=${signOut}>Sign out</button>
      </div>
      ${adminRoutes.length ? html`<nav class="admin" aria-label="Admin">
        <span class="muted-light" aria-hidden="true">Admin:</span>
        <ul>
          ${adminRoutes.map(
            (r) => html`<li>
              <a href=${`#/${r.path}`} aria-current=${r === active ? 'page' : undefined}>${r.label}</a>
            </li>`,
          )}
        </ul>
      </nav>` : ''}
    </header>
    <main id="main" tabindex="-1">
      <${View} session=${session} events=${events} key=${active.path} />
    </main>
  `;
}

// Preact appends to what is there: drop the static "Loading" placeholder first.
const root = document.getElementById('app');
root.textContent = '';
render(html`<${App} />`, root);

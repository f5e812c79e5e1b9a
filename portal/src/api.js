// The portal's only way to egsd: JSON over fetch to the public REST API, with the user's bearer
// token. Errors are Kubernetes Status objects; they become ApiError with the server's message.

import { noteServerTime } from './format.js';

export const API = '/apis/egs.dev/v1alpha1';

export class ApiError extends Error {
  constructor(status, body) {
    const message = (body && body.message) || `HTTP ${status}`;
    super(message);
    this.status = status;
    this.reason = body && body.reason;
    this.causes = (body && body.details && body.details.causes) || [];
  }
}

// The path of a namespaced collection or object: gpr('ws') or gpr('ws', 'name').
export function gprPath(ns, name) {
  const base = `${API}/namespaces/${encodeURIComponent(ns)}/gpuprovisionrequests`;
  return name ? `${base}/${encodeURIComponent(name)}` : base;
}

// A client bound to one token. Every method resolves to the parsed JSON body of a 2xx answer
// and rejects with ApiError otherwise (or TypeError when the server cannot be reached).
export function client(token, onUnauthenticated) {
  async function call(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = `Bearer ${token}`;
    const init = { method, headers };
    if (body !== undefined) {
      headers['Content-Type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
      init.body = JSON.stringify(body);
    }
    const res = await fetch(path, init);
    noteServerTime(res.headers.get('EGS-Server-Time'));
    const text = await res.text();
    let json = null;
    if (text) {
      try {
        json = JSON.parse(text);
      } catch {
        json = { message: text };
      }
    }
    if (!res.ok) {
      if (res.status === 401 && onUnauthenticated) onUnauthenticated();
      throw new ApiError(res.status, json);
    }
    return json;
  }
  // Streams a watch (?watch=1, newline-delimited {type, object}) until `signal` aborts or the
  // server ends it; calls onEvent for each event. Resolves when the stream ends.
  async function watch(path, resourceVersion, onEvent, signal) {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = `Bearer ${token}`;
    const sep = path.includes('?') ? '&' : '?';
    const rv = resourceVersion ? `&resourceVersion=${encodeURIComponent(resourceVersion)}` : '';
    const res = await fetch(`${path}${sep}watch=1${rv}`, { headers, signal });
    noteServerTime(res.headers.get('EGS-Server-Time'));
    if (!res.ok) {
      if (res.status === 401 && onUnauthenticated) onUnauthenticated();
      throw new ApiError(res.status, await res.json().catch(() => null));
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) onEvent(JSON.parse(line));
      }
    }
  }
  return {
    watch,
    get: (path) => call('GET', path),
    post: (path, body) => call('POST', path, body ?? {}),
    // JSON merge patch (RFC 7386).
    patch: (path, body) => call('PATCH', path, body),
    del: (path) => call('DELETE', path),
  };
}

// Who the token belongs to: {user, role, workspaces, projects, expires} from tokens/self.
export async function whoAmI(token) {
  const c = client(token);
  const t = await c.get(`${API}/tokens/self`);
  const spec = t.spec || {};
  return {
    user: spec.user || '?',
    role: spec.role || 'viewer',
    workspaces: spec.workspaces || [],
    projects: spec.projects || [],
    expires: spec.expires || '',
    tokenId: (t.metadata && t.metadata.name) || '',
  };
}

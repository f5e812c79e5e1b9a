// Sign in with a bearer token (issued by an admin: egsctl token create, or the admin token egsd
// prints on its first start). The token is kept in sessionStorage only.
import { useState } from 'preact/hooks';

import { html } from '../html.js';
import { ErrorBox } from '../components.js';

export function SignIn({ onSignIn, notice }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await onSignIn(token.trim());
    } catch (err) {
      setError(err.status === 401 ? new Error('This token is not valid (unknown, expired or revoked).') : err);
      setBusy(false);
    }
  };
  return html`<main id="main" class="signin">
    <h1>Elastic GPU Service</h1>
    <p>Sign in with your API token. It is kept for this browser tab only.</p>
    ${notice ? html`<p class="notice" role="status">${notice}</p>` : ''}
    <form onSubmit=${submit}>
      <label for="token">API token</label>
      <input id="token" name="token" type="password" autocomplete="off" required
        value=${token} onInput=${(e) => setToken(e.currentTarget.value)} />
      <button type="submit" disabled=${busy || !token.trim()}>Sign in</button>
    </form>
    <${ErrorBox} error=${error} />
    <p class="muted">No token? Ask an admin: <code>egsctl token create --user you --role member
      --workspace ws</code>. The admin token of a fresh egsd is in its data directory.</p>
  </main>`;
}

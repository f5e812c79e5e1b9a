// Small pieces shared by the views: polling loader, error box, phase badge, progress bar.
import { useEffect, useRef, useState } from 'preact/hooks';

import { html } from './html.js';
import { duration, parseTime, serverNow } from './format.js';

// Calls `load()` now and every `everyMs` (0 = once); returns {data, error, reload}. A failed
// poll keeps the last data and reports the error.
export function usePoll(load, everyMs, deps = []) {
  const [state, setState] = useState({ data: null, error: null });
  const live = useRef(true);
  const seq = useRef(0);
  const reload = async () => {
    const mine = ++seq.current;
    try {
      const data = await load();
      if (live.current && mine === seq.current) setState({ data, error: null });
    } catch (error) {
      if (live.current && mine === seq.current) setState((s) => ({ data: s.data, error }));
    }
  };
  useEffect(() => {
    live.current = true;
    reload();
    const timer = everyMs ? setInterval(reload, everyMs) : null;
    return () => {
      live.current = false;
      if (timer) clearInterval(timer);
    };
  }, deps);
  return { ...state, reload };
}

// The causes of an ApiError worth a line under its message: not those the message already says
// (its whole text, or its end after a colon, as in 'X "a" is invalid: spec.nodes: ...').
export function extraCauses(error, message) {
  return (error.causes || []).filter((c) => {
    const text = c.field ? `${c.field}: ${c.message}` : c.message;
    return c.message !== message && text !== message && !message.endsWith(`: ${text}`);
  });
}

export function ErrorBox({ error }) {
  if (!error) return null;
  const message = error.message || String(error);
  const causes = extraCauses(error, message);
  return html`<div class="error" role="alert">
    ${message}
    ${causes.length
      ? html`<ul>
          ${causes.map((c) => html`<li>${c.field ? `${c.field}: ` : ''}${c.message}</li>`)}
        </ul>`
      : ''}
  </div>`;
}

export function Phase({ phase }) {
  const p = phase || 'Unknown';
  return html`<span class=${`phase phase-${p.toLowerCase()}`}>${p}</span>`;
}

// Elapsed and time left of an active reservation [start, end).
export function Progress({ start, end, now }) {
  const s = parseTime(start);
  const e = parseTime(end);
  if (s == null || e == null || e <= s) return null;
  const done = Math.min(1, Math.max(0, (now - s) / (e - s)));
  const pct = Math.round(done * 100);
  const left = Math.max(0, (e - now) / 1000);
  const label = `${duration((now - s) / 1000)} elapsed, ${duration(left)} left`;
  return html`<div class="progress">
    <progress max="100" value=${pct} aria-label=${`Reservation ${pct}% done: ${label}`}></progress>
    <span class="muted">${label}</span>
  </div>`;
}

// Re-renders every `everyMs` so that relative times move; returns egsd's time now (serverNow).
export function useNow(everyMs = 1000) {
  const [now, setNow] = useState(serverNow());
  useEffect(() => {
    const t = setInterval(() => setNow(serverNow()), everyMs);
    return () => clearInterval(t);
  }, [everyMs]);
  return now;
}

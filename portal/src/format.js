// Formatting of times, durations and money for display. Times from the API are RFC 3339 UTC;
// the portal shows them in UTC (as egsctl does) with a relative hint.

// egsd's clock minus the browser's, from the EGS-Server-Time header of its latest answer: the
// API's timestamps are in egsd's time, which runs ahead of real time when its simulated fleet
// has a timeScale (and a browser's clock may be off), so relative times count from it.
let serverOffsetMs = 0;

export function noteServerTime(header, receivedMs = Date.now()) {
  const t = header ? Date.parse(header) : NaN;
  if (!Number.isNaN(t)) serverOffsetMs = t - receivedMs;
}

// egsd's time now, as far as its answers tell; the browser's before any.
export function serverNow() {
  return Date.now() + serverOffsetMs;
}

export function parseTime(s) {
  if (!s) return null;
  const t = Date.parse(s);
  return Number.isNaN(t) ? null : t;
}

// "1h30m", "45s", "2d4h" from seconds (the API's Go-style duration spelling).
export function duration(seconds) {
  if (seconds == null || Number.isNaN(seconds)) return '–';
  let s = Math.max(0, Math.round(seconds));
  if (s === 0) return '0s';
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  const parts = [];
  if (d) parts.push(`${d}d`);
  if (h) parts.push(`${h}h`);
  if (m) parts.push(`${m}m`);
  if (s && !d && !h) parts.push(`${s}s`);
  return parts.join('');
}

// Seconds from a Go-style duration ("90m", "1h30m", "45s"); null when it does not parse.
export function parseDuration(text) {
  const re = /(\d+(?:\.\d+)?)(h|m|s|ms)/g;
  const s = String(text || '').trim();
  if (!s || !/^(\d+(?:\.\d+)?(h|m|s|ms))+$/.test(s)) return null;
  let total = 0;
  for (const [, n, unit] of s.matchAll(re)) {
    total += Number(n) * { h: 3600, m: 60, s: 1, ms: 0.001 }[unit];
  }
  return total;
}

// "14:05 UTC" today, "Nov 24 14:05 UTC" otherwise.
export function clock(ms, now = serverNow()) {
  if (ms == null) return '–';
  const d = new Date(ms);
  const hm = d.toISOString().slice(11, 16);
  const sameDay = new Date(now).toISOString().slice(0, 10) === d.toISOString().slice(0, 10);
  if (sameDay) return `${hm} UTC`;
  const month = d.toLocaleString('en', { month: 'short', timeZone: 'UTC' });
  return `${month} ${d.getUTCDate()} ${hm} UTC`;
}

// "now", "in 12m", "3m ago".
export function relative(ms, now = serverNow()) {
  if (ms == null) return '';
  const diff = (ms - now) / 1000;
  if (Math.abs(diff) < 30) return 'now';
  return diff > 0 ? `in ${duration(diff)}` : `${duration(-diff)} ago`;
}

export function when(s, now = serverNow()) {
  const ms = parseTime(s);
  if (ms == null) return '–';
  return `${clock(ms, now)} (${relative(ms, now)})`;
}

export function money(v) {
  return typeof v === 'number' ? `$${v.toFixed(2)}` : '–';
}

// Why a request waits (status.waitCause, quote option cause) in words.
export const WAIT_WORDS = {
  StartsNow: 'starts now',
  WaitingForCapacity: 'waiting for free nodes',
  WaitingForMaxActive: 'the workspace already runs its maximum of requests at once',
  WaitingForQuota: 'the workspace GPU quota is in use',
  WaitingForEarliestStart: 'its earliest start has not come',
  WaitingForLeadTime: 'the cloud pool needs time to provision',
  Unplaceable: 'no allowed pool can ever hold it',
};

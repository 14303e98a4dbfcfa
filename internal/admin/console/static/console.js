// Laneway console: a hash-routed page over the JSON API under /v1.
// Whatever comes from the API is rendered as text (textContent, text nodes,
// setAttribute); nothing is ever parsed as HTML. This script holds what
// every page uses (DOM helpers, the API client, the token, the router);
// the pages are in endpoints.js, search.js and inbound.js. They are
// classic scripts sharing one global scope, loaded in that order.
'use strict';

const TOKEN_KEY = 'laneway.adminToken';
const REFRESH_MS = 2000;
const POLL_MS = 1000;
const DEAD_REASONS = ['payload_too_large', 'gone', 'max_attempts', 'max_age', 'endpoint_disabled',
  'endpoint_deleted', 'invalid_event', 'invalid_delivery'];
// Reasons that say the endpoint or the event itself is broken (red); the
// others (amber) are worth a redrive once the receiver is fixed.
const TERMINAL_REASONS = ['gone', 'endpoint_deleted', 'invalid_event', 'invalid_delivery'];
// Inbound requests: their statuses (internal/inbound/record.go) and colours.
const INBOUND_STATUSES = ['pending', 'verified', 'rejected', 'duplicate'];
const INBOUND_COLOURS = { pending: 'amber', verified: 'green', rejected: 'red', duplicate: 'grey' };

const $ = (id) => document.getElementById(id);
const view = $('view');

// ---------------------------------------------------------------- DOM helpers

// el builds an element: props are attributes, except class, text (the
// textContent) and on<event> listeners; string children become text nodes.
function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = String(v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c !== null && c !== undefined && c !== false) e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

const th = (text, cls) => el('th', { class: cls, text });
const td = (content, cls, title) => el('td', { class: cls, title }, content);
const num = (n) => (typeof n === 'number' ? n.toLocaleString() : '—');
const endpointLink = (id) => el('a', { href: '#/endpoints/' + encodeURIComponent(id), class: 'mono', text: id });

function pad(n) { return String(n).padStart(2, '0'); }

function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (isNaN(d)) return String(iso);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function fmtAge(s) {
  if (typeof s !== 'number' || !isFinite(s) || s <= 0) return '—';
  if (s < 1) return '< 1 s';
  if (s < 60) return Math.floor(s) + ' s';
  if (s < 3600) return `${Math.floor(s / 60)} m ${Math.floor(s % 60)} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} m`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

// datetime-local inputs hold local time without a zone; the API takes RFC 3339.
function toLocalInput(d) {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
function fromLocalInput(v) {
  if (!v) return '';
  const d = new Date(v);
  return isNaN(d) ? '' : d.toISOString();
}
function isoToLocalInput(iso) {
  const d = iso ? new Date(iso) : null;
  return d && !isNaN(d) ? toLocalInput(d) : '';
}

// randomHex works outside secure contexts too, unlike crypto.randomUUID.
function randomHex(bytes) {
  return Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, '0')).join('');
}

function clip(s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + '…' : s; }

// ---------------------------------------------------------------- API

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

function parseJSON(text) {
  try { return text ? JSON.parse(text) : null; } catch { return null; }
}

// apiFetch calls the API with the token and returns the response once it
// is a success; a 401 asks for the token, other failures throw ApiError.
async function apiFetch(method, path, body, extraHeaders) {
  const headers = { Accept: 'application/json', ...extraHeaders };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = 'Bearer ' + token;
  const init = { method, headers, cache: 'no-store' };
  // Every write declares JSON, even without a body: a Laneway without an
  // admin token refuses POSTs that a foreign page could forge.
  if (body !== undefined || method !== 'GET') headers['Content-Type'] = 'application/json';
  if (body !== undefined) init.body = JSON.stringify(body);
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'Laneway is not reachable: ' + e.message);
  }
  if (res.status === 401) {
    if (token) { sessionStorage.removeItem(TOKEN_KEY); updateSignout(); }
    askToken(token ? 'The API refused that token. Enter the admin token again.' : 'This Laneway requires its admin token.');
    throw new ApiError(401, 'admin token required');
  }
  if (!res.ok) {
    const data = parseJSON(await res.text());
    throw new ApiError(res.status, (data && data.error) || `${res.status} ${res.statusText}`);
  }
  return res;
}

async function api(method, path, body, extraHeaders) {
  const res = await apiFetch(method, path, body, extraHeaders);
  return parseJSON(await res.text());
}

// ---------------------------------------------------------------- token

const login = $('login');

function askToken(reason) {
  $('login-reason').textContent = reason;
  if (!login.open) login.showModal();
  $('token').focus();
}

$('login-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const token = $('token').value.trim();
  if (!token) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  $('token').value = '';
  login.close();
  updateSignout();
  route();
});
login.addEventListener('cancel', (e) => e.preventDefault()); // nothing works without it

function updateSignout() { $('signout').hidden = !sessionStorage.getItem(TOKEN_KEY); }
$('signout').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  updateSignout();
  route();
});

// ---------------------------------------------------------------- feedback

let noticeTimer;
function notify(message, isError) {
  const n = $('notice');
  n.textContent = message;
  n.className = 'notice' + (isError ? ' error' : '');
  n.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => { n.hidden = true; }, isError ? 10000 : 5000);
}

function fail(e) { if (!(e instanceof ApiError && e.status === 401)) notify(e.message, true); }

function setLive(state) {
  const live = $('live');
  live.hidden = state === null;
  if (state === null) return;
  live.classList.toggle('stale', state instanceof Error);
  live.textContent = state instanceof Error ? 'Update failed, retrying' : 'Live · ' + fmtTime(state).slice(11);
}

// act disables btn while fn runs and reports fn's error.
async function act(btn, fn) {
  btn.disabled = true;
  try { await fn(); } catch (e) { fail(e); } finally { btn.disabled = false; }
}

// ---------------------------------------------------------------- routing

// A page gets a context that ends when the route changes, so that its
// timers stop and late answers are dropped.
function newContext() {
  const timers = new Set();
  let alive = true;
  return {
    get alive() { return alive; },
    every(fn, ms) {
      const tick = async () => {
        if (!alive) return;
        if (!document.hidden) await fn();
        if (alive) timers.add(setTimeout(tick, ms));
      };
      tick();
    },
    sleep(ms) { return new Promise((resolve) => { timers.add(setTimeout(resolve, ms)); }); },
    stop() { alive = false; timers.forEach(clearTimeout); timers.clear(); },
  };
}

let current = newContext();

function route() {
  current.stop();
  current = newContext();
  setLive(null);
  const [path, query] = (location.hash || '#/endpoints').slice(1).split('?');
  const params = new URLSearchParams(query || '');
  let parts;
  try { parts = path.split('/').filter(Boolean).map(decodeURIComponent); } catch { parts = []; }
  const page = parts[0] || 'endpoints';
  document.querySelectorAll('[data-nav]').forEach((a) => a.classList.toggle('active', a.dataset.nav === page));
  if (page === 'endpoints' && parts[1]) endpointPage(current, parts[1]);
  else if (page === 'dead') deadPage(current, params);
  else if (page === 'events') eventsPage(current, params);
  else if (page === 'inbound' && parts[1] === 'requests' && parts[2]) inboundRequestPage(current, parts[2]);
  else if (page === 'inbound') inboundPage(current, params);
  else endpointsPage(current);
}

window.addEventListener('hashchange', route);

// ---------------------------------------------------------------- state

// endpointState names an endpoint's state and its colour.
function endpointState(ep) {
  const h = ep.health || {};
  const breaker = (h.breaker && h.breaker.state) || 'closed';
  if (ep.status !== 'active') return ['disabled', 'red'];
  if (ep.paused) return ['paused', 'grey'];
  if (breaker === 'open') return ['breaker open', 'red'];
  if (breaker === 'probing') return ['breaker half-open', 'amber'];
  if (h.parked_reason || h.parked > 0) return ['parked', 'amber'];
  return ['healthy', 'green'];
}

function badge([label, colour], extra) {
  return el('span', { class: `badge ${colour}${extra ? ' ' + extra : ''}`, 'data-state': label, text: label });
}

// A pull or batch endpoint's feed. For a pull endpoint, `feed` is where
// its consumer stands (its acknowledged cursor); for a batch endpoint, how
// far Laneway sent the feed to the URL (every event before the cursor
// accepted with a 2xx or dead-lettered). The API gives the position in GET
// answers only, and leaves it out when Kafka cannot say.
const isPull = (ep) => ep.mode === 'pull';
const isBatch = (ep) => ep.mode === 'batch';
const hasFeed = (ep) => isPull(ep) || isBatch(ep);

function modeText(ep) {
  return (ep.mode || 'push') + (ep.payload === 'thin' ? ' · thin' : '');
}

// feedLag is "12 events" or "caught up" for a pull consumer, "12 events to
// send" or "all sent" for a batch endpoint; feedOldest the age of the
// oldest event not acknowledged (not sent), "—" when there is none.
function feedLag(f, batch) {
  if (!(f.lag > 0)) return batch ? 'all sent' : 'caught up';
  return `${num(f.lag)} event${f.lag === 1 ? '' : 's'}${batch ? ' to send' : ''}`;
}
function feedOldest(f) { return f.lag > 0 ? fmtAge(f.oldest_unacked_age_seconds) : '—'; }

// feedCell shows, in the endpoints table, where a pull endpoint's consumer
// stands or how far a batch endpoint's feed was sent.
function feedCell(ep) {
  if (!hasFeed(ep)) return td('—', 'num');
  const f = ep.feed;
  if (!f) return td('not available', 'num muted');
  const batch = isBatch(ep);
  let pos;
  if (batch) pos = el('span', { class: 'sub' }, 'sent up to ', el('code', { text: f.acked_cursor || f.start_cursor }));
  else if (f.acked_cursor) pos = el('span', { class: 'sub' }, 'acked ', el('code', { text: f.acked_cursor }));
  else pos = el('span', { class: 'sub', text: 'not acknowledged' });
  const oldest = f.lag > 0 ? ' · oldest ' + feedOldest(f) : '';
  const cell = td([el('span', { class: 'feed-lag', text: feedLag(f, batch) + oldest }), pos], 'num feed');
  cell.dataset.feedLag = String(f.lag);
  cell.dataset.feedAcked = String(Boolean(f.acked_cursor));
  return cell;
}

// batchSizes are a batch endpoint's sizes in effect, for its page.
function batchSizes(ep) {
  const b = ep.batch;
  if (!b) return [['Batch sizes', 'not available']];
  return [
    ['Max events per batch', el('span', { id: 'batch-max-events', text: num(b.max_events) })],
    ['Max bytes per batch', el('span', { id: 'batch-max-bytes', text: `${fmtBytes(b.max_bytes)} (${num(b.max_bytes)} bytes)` })],
    ['Max wait', el('span', { id: 'batch-max-wait', text: `${num(b.max_wait_ms)} ms` })],
  ];
}

function breakerText(b) {
  if (!b) return '—';
  const state = b.state === 'probing' ? 'half-open' : b.state || 'closed';
  const parts = [state];
  if (b.consecutive_failures) parts.push(`${b.consecutive_failures} failures`);
  if (b.state === 'open' && b.paused_until) parts.push('until ' + fmtTime(b.paused_until).slice(11));
  return parts.join(' · ');
}

// kv is a definition list's items: a dt and a dd per pair.
function kv(pairs) {
  return pairs.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', {}, v)]);
}

// detailHead is the head of a page about one item: a link back to its
// list, the item's id and its state badge.
function detailHead(listHref, listName, id, state) {
  return el('div', { class: 'pagehead' }, el('div', { class: 'grow' },
    el('div', { class: 'small' }, el('a', { href: listHref, text: '← ' + listName })),
    el('h1', {}, el('span', { class: 'mono', text: id }), state)));
}

// ---------------------------------------------------------------- start

// The pages live in the scripts linked after this one (endpoints.js,
// search.js, inbound.js; all deferred, so they run in order);
// DOMContentLoaded comes once every one of them has run.
document.addEventListener('DOMContentLoaded', () => {
  updateSignout();
  route();
});

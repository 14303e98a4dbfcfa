// Laneway console: a hash-routed page over the JSON API under /v1.
// Whatever comes from the API is rendered as text (textContent, text nodes,
// setAttribute); nothing is ever parsed as HTML.
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

// ---------------------------------------------------------------- endpoints

function endpointsPage(ctx) {
  const filter = el('input', { type: 'search', id: 'endpoint-filter', placeholder: 'Filter by id, tenant, URL or mode', 'aria-label': 'Filter endpoints' });
  const cards = el('div', { class: 'cards', id: 'summary' });
  const body = el('tbody', { id: 'endpoints-body' }, el('tr', {}, el('td', { class: 'empty', colspan: 13, text: 'Loading…' })));
  view.replaceChildren(
    el('div', { class: 'pagehead' },
      el('div', { class: 'grow' }, el('h1', { text: 'Endpoints' }),
        el('div', { class: 'muted', text: 'Most behind first (oldest pending delivery), refreshed every 2 s.' })),
      filter),
    cards,
    el('div', { class: 'tablewrap' }, el('table', { id: 'endpoints' },
      el('thead', {}, el('tr', {}, th('State'), th('Endpoint'), th('Mode'), th('Tenant'), th('Limit', 'num'), th('Pending', 'num'),
        th('In flight', 'num'), th('Parked', 'num'), th('Oldest pending', 'num'), th('Feed', 'num'), th('Breaker'),
        th('Last minute', 'num'), th('Last error'))),
      body)));

  let endpoints = null;
  const draw = () => {
    if (!endpoints) return;
    const q = filter.value.trim().toLowerCase();
    const shown = endpoints.filter((ep) => !q || [ep.id, ep.tenant, ep.url || '', modeText(ep)].some((s) => s.toLowerCase().includes(q)));
    if (!shown.length) {
      body.replaceChildren(el('tr', {}, el('td', { class: 'empty', colspan: 13,
        text: endpoints.length ? 'No endpoint matches the filter.' : 'No endpoints yet. Create one with POST /v1/endpoints.' })));
      return;
    }
    body.replaceChildren(...shown.map(endpointRow));
  };
  filter.addEventListener('input', draw);

  ctx.every(async () => {
    try {
      const [list, platform] = await Promise.all([
        api('GET', '/v1/endpoints?sort=oldest_pending_age'),
        api('GET', '/v1/health').catch((e) => (e.status === 501 ? null : Promise.reject(e))),
      ]);
      if (!ctx.alive) return;
      endpoints = list.data || [];
      draw();
      cards.replaceChildren(...summaryCards(platform, endpoints));
      setLive(new Date());
    } catch (e) {
      if (ctx.alive) setLive(e);
    }
  }, REFRESH_MS);
}

function endpointRow(ep) {
  const h = ep.health || {};
  const pm = h.per_minute || {};
  const target = isPull(ep) ? 'feed GET /v1/feed/' + ep.id : ep.url; // batch: the URL it POSTs to
  return el('tr', { 'data-endpoint-id': ep.id, 'data-mode': ep.mode || 'push' },
    td(badge(endpointState(ep))),
    td([endpointLink(ep.id), el('span', { class: 'sub', title: target, text: target })]),
    td(modeText(ep), 'mode'),
    td(ep.tenant),
    td(num(ep.max_concurrency), 'num'),
    td(num(h.pending), 'num'),
    td(num(h.in_flight), 'num'),
    td(num(h.parked), 'num'),
    td(fmtAge(h.oldest_pending_age_seconds), 'num'),
    feedCell(ep),
    td(breakerText(h.breaker)),
    td(h.per_minute ? `${num(pm.delivered)} ok · ${num(pm.failed)} retry · ${num(pm.dead)} dead` : '—', 'num'),
    td(h.last_error || '', 'err', h.last_error || undefined));
}

function summaryCards(p, endpoints) {
  const card = (k, v, extra) => el('div', { class: 'card' }, el('div', { class: 'k', text: k }), el('div', { class: 'v' }, v), extra);
  if (!p) return [card('Endpoints', num(endpoints.length))];
  const e = p.endpoints || {};
  return [
    card('Endpoints', num(e.total)),
    card('Healthy oldest pending', fmtAge(p.healthy_oldest_pending_age_seconds)),
    card('Oldest pending', fmtAge(p.oldest_pending_age_seconds),
      p.most_behind_endpoint_id ? el('div', { class: 'small' }, endpointLink(p.most_behind_endpoint_id)) : null),
    card('Paused', num(e.paused)),
    card('Parked', num(e.parked)),
    card('Breaker open', num(e.breaker_open)),
    card('Disabled', num(e.disabled)),
  ];
}

// ---------------------------------------------------------------- endpoint

function endpointPage(ctx, id) {
  const path = '/v1/endpoints/' + encodeURIComponent(id);
  const state = el('span', { id: 'endpoint-state' });
  const config = el('dl', { class: 'kv', id: 'endpoint-config' });
  const health = el('dl', { class: 'kv', id: 'endpoint-health' });
  const feed = el('dl', { class: 'kv', id: 'endpoint-feed' });
  const feedNote = el('p', { class: 'muted small', id: 'endpoint-feed-note' });
  const feedTitle = el('h2', { id: 'feed-title', text: 'Feed consumer' });
  const feedPanel = el('section', { class: 'panel', id: 'feed-panel', hidden: true }, feedTitle, feed, feedNote);
  const lastError = el('pre', { class: 'error', id: 'last-error', hidden: true });
  const lastErrorNote = el('p', { class: 'muted', id: 'last-error-note', text: 'No error recorded.' });
  const pauseBtn = el('button', { id: 'pause', type: 'button', hidden: true, text: 'Pause deliveries' });
  const resumeBtn = el('button', { id: 'resume', type: 'button', class: 'primary', hidden: true, text: 'Resume deliveries' });
  const enableBtn = el('button', { id: 'enable', type: 'button', class: 'primary', hidden: true, text: 'Re-enable endpoint' });
  const concurrency = el('input', { id: 'concurrency', type: 'number', min: 1, max: 1000, step: 1, required: true });
  const saveBtn = el('button', { id: 'save-concurrency', type: 'submit', text: 'Save' });
  const resendBtn = el('button', { id: 'resend', type: 'button', class: 'danger', text: 'Resend dead letters' });
  const progress = redriveProgress(ctx);

  view.replaceChildren(
    detailHead('#/endpoints', 'Endpoints', id, state),
    el('div', { class: 'grid' },
      el('section', { class: 'panel' }, el('h2', { text: 'Controls' }),
        el('div', { class: 'actions' }, pauseBtn, resumeBtn, enableBtn),
        el('form', { id: 'concurrency-form', class: 'inline' },
          el('label', {}, 'Max concurrency', concurrency), saveBtn),
        el('div', { class: 'actions' }, resendBtn,
          el('a', { href: '#/dead?endpoint_id=' + encodeURIComponent(id), id: 'endpoint-dead-link', text: 'Browse dead letters' })),
        progress.node),
      el('section', { class: 'panel' }, el('h2', { text: 'Last error' }), lastErrorNote, lastError)),
    el('div', { class: 'grid' },
      el('section', { class: 'panel' }, el('h2', { text: 'Delivery' }), health),
      feedPanel,
      el('section', { class: 'panel' }, el('h2', { text: 'Configuration' }), config)));

  let ep = null;
  let dirty = false; // the operator is editing the limit: refreshes leave it alone
  concurrency.addEventListener('input', () => { dirty = true; });

  const draw = () => {
    state.replaceChildren(badge(endpointState(ep), 'big'));
    const active = ep.status === 'active';
    pauseBtn.hidden = !active || ep.paused;
    resumeBtn.hidden = !active || !ep.paused;
    enableBtn.hidden = active;
    if (!dirty) concurrency.value = ep.max_concurrency;
    const pull = isPull(ep);
    const batch = isBatch(ep);
    let mode = 'push: POST to the URL';
    if (pull) mode = 'pull: a feed its consumer reads';
    if (batch) mode = 'batch: signed POSTs of {"batch":[…]} to the URL, one at a time';
    config.replaceChildren(...kv([
      ['Mode', mode],
      pull ? ['Feed', el('code', { text: 'GET /v1/feed/' + ep.id })] : ['URL', ep.url],
      ...(batch ? batchSizes(ep) : []),
      ['Payload', ep.payload === 'thin' ? 'thin (no data: the receiver fetches the state)' : 'full'],
      ['Tenant', ep.tenant],
      ['Event types', ep.event_types.length ? ep.event_types.join(', ') : 'every type'],
      // A feed's lane appends up to this many entities at a time; a batch
      // endpoint still POSTs one batch at a time.
      ['Max concurrency', num(ep.max_concurrency) + (pull || batch ? ' (appends to the feed)' : '')],
      ['Status', ep.status + (ep.disabled_reason ? ' (' + ep.disabled_reason + ')' : '')],
      ['Paused', ep.paused ? 'yes' : 'no'],
      ['Created', fmtTime(ep.created_at)],
      ['Updated', fmtTime(ep.updated_at)],
    ]));
    const h = ep.health;
    if (!h) {
      health.replaceChildren(...kv([['Health', 'not available']]));
    } else {
      const pm = h.per_minute || {};
      health.replaceChildren(...kv([
        ['Pending', num(h.pending)],
        ['In flight', num(h.in_flight)],
        ['Parked', num(h.parked) + (h.parked_reason ? ' (' + h.parked_reason + ')' : '')],
        ['Oldest pending', fmtAge(h.oldest_pending_age_seconds)],
        ['Breaker', breakerText(h.breaker)],
        ['Last minute', `${num(pm.delivered)} ${pull || batch ? 'appended to the feed' : 'delivered'} · ${num(pm.failed)} retried · ${num(pm.dead)} dead · ${num(pm.superseded)} superseded`],
        ['Last success', fmtTime(h.last_success_at)],
        ['Owner', h.owner || '—'],
        ['Reported', fmtTime(h.updated_at)],
      ]));
      lastError.hidden = !h.last_error;
      lastError.textContent = h.last_error || '';
      lastErrorNote.textContent = h.last_error ? 'At ' + fmtTime(h.last_error_at) : 'No error recorded.';
    }
    drawFeed(pull, batch);
  };

  const drawFeed = (pull, batch) => {
    feedPanel.hidden = !pull && !batch;
    if (feedPanel.hidden) return;
    feedTitle.textContent = batch ? 'Batch sending' : 'Feed consumer';
    feed.dataset.mode = ep.mode;
    const f = ep.feed;
    if (!f) {
      delete feed.dataset.lag;
      delete feed.dataset.acked;
      feed.replaceChildren(...kv([['Position', 'not available']]));
      feedNote.textContent = 'Kafka did not answer for the feed; retrying.';
      return;
    }
    feed.dataset.lag = String(f.lag);
    feed.dataset.acked = String(Boolean(f.acked_cursor));
    if (batch) {
      feed.replaceChildren(...kv([
        ['Sent up to', el('code', { id: 'feed-acked', text: f.acked_cursor || f.start_cursor })],
        ['To send', el('span', { id: 'feed-lag', text: feedLag(f, true) })],
        ['Oldest unsent', el('span', { id: 'feed-oldest', text: feedOldest(f) })],
        ['Oldest retained', el('code', { text: f.start_cursor })],
        ['Next to append', el('code', { text: f.end_cursor })],
      ]));
      feedNote.textContent = 'Every event before the sent-up-to cursor was accepted by the URL with a 2xx or dead-lettered; ' +
        'the events to send include the batch in flight, and the oldest of them counts in the oldest pending age.' +
        (ep.paused ? ' Paused: nothing is sent until you resume.' : '');
      return;
    }
    feed.replaceChildren(...kv([
      ['Acknowledged', f.acked_cursor ? el('code', { id: 'feed-acked', text: f.acked_cursor }) : el('span', { id: 'feed-acked', text: 'not acknowledged' })],
      ['Lag', el('span', { id: 'feed-lag', text: feedLag(f) })],
      ['Oldest unacknowledged', el('span', { id: 'feed-oldest', text: feedOldest(f) })],
      ['Oldest retained', el('code', { text: f.start_cursor })],
      ['Next to append', el('code', { text: f.end_cursor })],
    ]));
    feedNote.textContent = f.acked_cursor
      ? 'The lag counts the events after the acknowledged cursor. The oldest of them also counts in the oldest pending age.'
      : 'The consumer has not acknowledged a position (POST /v1/feed/{id}/ack). If it keeps its cursor itself, the lag counts every retained event.';
  };

  const refresh = async () => {
    try {
      const got = await api('GET', path);
      if (!ctx.alive) return;
      ep = got;
      draw();
      setLive(new Date());
    } catch (e) {
      if (!ctx.alive) return;
      if (e.status === 404) {
        view.replaceChildren(el('p', { class: 'notice error', text: `Endpoint ${id} not found.` }));
        ctx.stop();
        return;
      }
      setLive(e);
    }
  };
  // A change answers with the endpoint without its health and feed
  // position: keep the last.
  const changed = (got, message) => {
    ep = { ...got, health: ep && ep.health, feed: ep && ep.feed };
    draw();
    notify(message);
  };

  pauseBtn.addEventListener('click', () => act(pauseBtn, async () => {
    changed(await api('POST', path + '/pause'), 'Paused: new deliveries wait in Kafka until you resume.');
  }));
  resumeBtn.addEventListener('click', () => act(resumeBtn, async () => {
    changed(await api('POST', path + '/resume'), 'Resumed: deliveries flow again.');
  }));
  enableBtn.addEventListener('click', () => act(enableBtn, async () => {
    changed(await api('PATCH', path, { status: 'active' }), 'Endpoint re-enabled.');
  }));
  $('concurrency-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const n = Number(concurrency.value);
    if (!Number.isInteger(n) || n < 1 || n > 1000) {
      notify('Max concurrency must be a whole number between 1 and 1000.', true);
      return;
    }
    act(saveBtn, async () => {
      const got = await api('PATCH', path, { max_concurrency: n });
      dirty = false;
      changed(got, `Max concurrency set to ${got.max_concurrency}.`);
    });
  });
  resendBtn.addEventListener('click', () => act(resendBtn, async () => {
    await progress.start({ endpoint_id: id });
  }));

  ctx.every(refresh, REFRESH_MS);
}

function kv(pairs) {
  return pairs.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', {}, v)]);
}

// ---------------------------------------------------------------- redrive

// jobProgress starts a background job (a redrive, a replay) and follows it
// until it ends. opts: prefix of the element ids, title, submit (POST path),
// poll (GET path before the job id), counts ([label, field] pairs), done
// (the notice of a finished job).
function jobProgress(ctx, opts) {
  const p = opts.prefix;
  const status = el('span', { id: p + '-status' });
  const bar = el('progress', { id: p + '-bar', max: 1 });
  const counts = el('div', { class: 'counts', id: p + '-counts' });
  const error = el('pre', { class: 'error', id: p + '-error', hidden: true });
  const jobId = el('code', { id: p + '-job' });
  const node = el('div', { class: 'progress', id: p + '-progress', hidden: true },
    el('div', { class: 'actions' }, el('strong', { text: opts.title }), jobId, status), bar, counts, error);

  const draw = (job) => {
    node.hidden = false;
    node.dataset.jobId = job.id;
    node.dataset.status = job.status;
    jobId.textContent = job.id;
    const colour = { running: 'amber', done: 'green', failed: 'red' }[job.status] || 'grey';
    status.replaceChildren(badge([job.status, colour]));
    if (job.status === 'running') bar.removeAttribute('value'); // indeterminate while scanning
    else bar.value = 1;
    const c = (label, n) => el('span', {}, label + ' ', el('b', { text: num(n) }));
    counts.replaceChildren(...opts.counts.map(([label, field]) => c(label, job[field])));
    error.hidden = !job.error;
    error.textContent = job.error || '';
  };

  return {
    node,
    // start submits request and resolves to the job once it ended (or
    // null when the page was left first).
    async start(request) {
      // The API takes a repeated request body for a retry and answers with
      // the earlier job; a click is a new intention (letters may have died
      // since, a secret may have been fixed), so each gets its own key.
      let job = await api('POST', opts.submit, request, { 'Idempotency-Key': 'console-' + randomHex(16) });
      draw(job);
      while (job.status === 'running' && ctx.alive) {
        await ctx.sleep(POLL_MS);
        if (!ctx.alive) return null;
        job = await api('GET', opts.poll + encodeURIComponent(job.id));
        draw(job);
      }
      if (job.status === 'done') notify(opts.done(job));
      else if (job.status === 'failed') notify(opts.title + ' failed: ' + (job.error || 'unknown error'), true);
      return job;
    },
  };
}

// redriveProgress starts a redrive and follows its job until it ends.
// Letters an earlier redrive sent are not sent twice.
function redriveProgress(ctx) {
  return jobProgress(ctx, {
    prefix: 'redrive', title: 'Redrive', submit: '/v1/dead/redrive', poll: '/v1/redrives/',
    counts: [['matched', 'matched'], ['redriven', 'redriven'], ['skipped', 'skipped'],
      ['already redriven', 'already_redriven'], ['scanned', 'scanned']],
    done: (job) => `Redrive done: ${num(job.redriven)} redriven, ${num(job.skipped)} skipped.`,
  });
}

// ---------------------------------------------------------------- search pages

// searchPage builds a filter form, a results table with "Load more" and
// keeps the filters in the address so that a search can be linked.
function searchPage(ctx, opts) {
  const form = el('form', { class: 'filters panel', id: opts.id + '-form' }, ...opts.fields,
    el('button', { type: 'submit', class: 'primary', id: opts.id + '-search', text: 'Search' }));
  const body = el('tbody', { id: opts.id + '-body' });
  const status = el('div', { class: 'muted small', id: opts.id + '-status' });
  const more = el('button', { type: 'button', id: opts.id + '-more', hidden: true, text: 'Load more' });
  const table = el('div', { class: 'tablewrap' }, el('table', { id: opts.id + '-table' },
    el('thead', {}, el('tr', {}, ...opts.columns)), body));
  view.replaceChildren(
    el('div', { class: 'pagehead' }, el('div', { class: 'grow' }, el('h1', { text: opts.title }),
      el('div', { class: 'muted', text: opts.subtitle }))),
    ...(opts.before || []), form, ...(opts.extra || []), table, el('div', { class: 'more' }, more), status);

  let cursor = '';
  let query = '';
  let shown = 0;
  const fetchPage = async (append) => {
    const params = new URLSearchParams(query);
    params.set('limit', '50');
    if (append) params.set('cursor', cursor);
    try {
      const page = await api('GET', opts.path + '?' + params);
      if (!ctx.alive) return;
      const rows = (page.data || []).map(opts.row);
      if (append) body.append(...rows); else body.replaceChildren(...rows);
      shown = append ? shown + rows.length : rows.length;
      if (!shown) body.replaceChildren(el('tr', {}, el('td', { class: 'empty', colspan: opts.columns.length, text: opts.empty })));
      cursor = page.next_cursor || '';
      more.hidden = !cursor;
      status.textContent = `${num(shown)} shown · ${num(page.scanned)} records examined by the last page`;
      if (opts.onResults) opts.onResults();
    } catch (e) {
      if (!ctx.alive) return;
      fail(e);
      status.textContent = 'Search failed: ' + e.message;
    }
  };
  const search = () => {
    query = opts.query().toString();
    history.replaceState(null, '', `#/${opts.id}${query ? '?' + query : ''}`);
    body.replaceChildren(el('tr', {}, el('td', { class: 'empty', colspan: opts.columns.length, text: 'Searching…' })));
    return fetchPage(false);
  };
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act($(opts.id + '-search'), search);
  });
  more.addEventListener('click', () => act(more, () => fetchPage(true)));
  return { search, body };
}

// searchParams is the query of a search form: each filter that has a
// value, in the order given.
function searchParams(filters) {
  const p = new URLSearchParams();
  for (const [key, value] of Object.entries(filters)) if (value) p.set(key, value);
  return p;
}

// bulkActions is the selection of a results table and its two job
// buttons: "<verb> selected" submits the ids of the ticked rows,
// "<verb> all matching" the filters of the results shown. whyNotAll says
// why the second may not run ('' when it may); allHint says what it does.
function bulkActions(o) {
  const selectedBtn = el('button', { type: 'button', id: o.id + '-selected', disabled: true, text: o.verb + ' selected' });
  const allBtn = el('button', { type: 'button', id: o.id + '-all', class: 'danger', disabled: true, text: o.verb + ' all matching' });
  const hint = el('span', { class: 'muted small', id: o.id + '-hint' });
  const selectAll = el('input', { type: 'checkbox', id: o.selectAllId, 'aria-label': 'Select all shown' });
  const attr = 'data-' + o.attr;
  const boxes = () => [...view.querySelectorAll(`input[${attr}]`)];
  const update = () => {
    const n = boxes().filter((b) => b.checked).length;
    selectedBtn.disabled = n === 0;
    selectedBtn.textContent = n ? `${o.verb} selected (${n})` : `${o.verb} selected`;
    const why = o.whyNotAll();
    allBtn.disabled = !!why;
    hint.textContent = why || o.allHint;
  };
  selectAll.addEventListener('change', () => { boxes().forEach((b) => { b.checked = selectAll.checked; }); update(); });
  selectedBtn.addEventListener('click', () => act(selectedBtn,
    () => o.submitSelected(boxes().filter((b) => b.checked).map((b) => b.getAttribute(attr)))));
  allBtn.addEventListener('click', () => act(allBtn, o.submitAll));
  return {
    buttons: [selectedBtn, allBtn, hint],
    header: el('th', {}, selectAll),
    checkbox: (id) => el('input', { type: 'checkbox', [attr]: id, 'aria-label': 'Select ' + id, onchange: update }),
    reset: () => { selectAll.checked = false; update(); },
    update,
  };
}

function deadPage(ctx, params) {
  const endpoint = el('input', { id: 'dead-endpoint', list: 'dead-endpoints', placeholder: 'any', value: params.get('endpoint_id') || '', class: 'mono' });
  const endpoints = el('datalist', { id: 'dead-endpoints' });
  const reason = el('select', { id: 'dead-reason' }, el('option', { value: '', text: 'any' }),
    ...DEAD_REASONS.map((r) => el('option', { value: r, text: r })));
  reason.value = params.get('reason') || '';
  const since = el('input', { id: 'dead-since', type: 'datetime-local', value: isoToLocalInput(params.get('since')) });
  const until = el('input', { id: 'dead-until', type: 'datetime-local', value: isoToLocalInput(params.get('until')) });
  const progress = redriveProgress(ctx);

  const filters = () => searchParams({
    endpoint_id: endpoint.value.trim(), reason: reason.value,
    since: fromLocalInput(since.value), until: fromLocalInput(until.value),
  });
  let searched = new URLSearchParams(); // the filters of the results shown
  const bulk = bulkActions({
    id: 'redrive', selectAllId: 'dead-select-all', verb: 'Redrive', attr: 'letter-id',
    whyNotAll: () => (searched.get('endpoint_id') ? '' : 'Filter by one endpoint to redrive all its matching letters.'),
    allHint: 'Redrives every letter of the endpoint matching these filters, not only those shown.',
    submitSelected: (ids) => progress.start({ ids }),
    submitAll: () => {
      const req = { endpoint_id: searched.get('endpoint_id') };
      for (const k of ['reason', 'since', 'until']) if (searched.get(k)) req[k] = searched.get(k);
      return progress.start(req);
    },
  });

  const page = searchPage(ctx, {
    id: 'dead', title: 'Dead letters', path: '/v1/dead',
    subtitle: 'Deliveries that failed for good, with their reason. Redrive sends them again, in the order they died.',
    fields: [
      el('label', {}, 'Endpoint', endpoint), endpoints,
      el('label', {}, 'Reason', reason),
      el('label', {}, 'Died after', since),
      el('label', {}, 'Died before', until),
    ],
    extra: [el('div', { class: 'panel' }, el('div', { class: 'actions' }, ...bulk.buttons), progress.node)],
    columns: [bulk.header, th('Died'), th('Endpoint'), th('Reason'), th('Event'), th('Attempts', 'num'), th('Last error / detail')],
    empty: 'No dead letters match.',
    query: () => { searched = filters(); return searched; },
    onResults: bulk.reset,
    row: (l) => {
      const d = l.delivery || {};
      const detail = d.last_error || l.detail || '';
      return el('tr', { 'data-letter-id': l.id },
        td(bulk.checkbox(l.id)),
        td(fmtTime(l.dead_at)),
        td(l.endpoint_id ? endpointLink(l.endpoint_id) : '—'),
        td(badge([l.reason, TERMINAL_REASONS.includes(l.reason) ? 'red' : 'amber'])),
        td(d.event_id ? [el('span', { class: 'mono', text: d.event_id }), el('span', { class: 'sub', text: `${d.type} · ${d.entity} @ ${d.revision}` })] : el('span', { class: 'muted', text: l.source || '—' })),
        td(num(d.attempts), 'num'),
        td(detail, 'err', detail || undefined));
    },
  });
  api('GET', '/v1/endpoints').then((list) => {
    if (ctx.alive) endpoints.replaceChildren(...(list.data || []).map((ep) => el('option', { value: ep.id, text: `${ep.tenant} · ${ep.url}` })));
  }, () => {});
  bulk.update();
  page.search();
}

function eventsPage(ctx, params) {
  const since = el('input', { id: 'events-since', type: 'datetime-local', required: true,
    value: isoToLocalInput(params.get('since')) || toLocalInput(new Date(Date.now() - 3600e3)) });
  const until = el('input', { id: 'events-until', type: 'datetime-local', value: isoToLocalInput(params.get('until')) });
  const text = (id, key, placeholder) => el('input', { id, placeholder, value: params.get(key) || '' });
  const tenant = text('events-tenant', 'tenant', 'any');
  const type = text('events-type', 'type', 'any');
  const entity = text('events-entity', 'entity', 'any');

  const page = searchPage(ctx, {
    id: 'events', title: 'Events', path: '/v1/events',
    subtitle: 'Events Laneway accepted, by the time Kafka stored them: "did you send it?"',
    fields: [
      el('label', {}, 'Accepted after', since),
      el('label', {}, 'Accepted before', until),
      el('label', {}, 'Tenant', tenant),
      el('label', {}, 'Type', type),
      el('label', {}, 'Entity', entity),
    ],
    columns: [th('Accepted'), th('Event'), th('Type'), th('Tenant'), th('Entity'), th('Revision', 'num'), th('Partition / offset', 'num'), th('Data')],
    empty: 'No events in this range.',
    query: () => searchParams({
      since: fromLocalInput(since.value), until: fromLocalInput(until.value),
      tenant: tenant.value.trim(), type: type.value.trim(), entity: entity.value.trim(),
    }),
    row: (ev) => {
      const data = ev.data === undefined ? '' : JSON.stringify(ev.data);
      return el('tr', { 'data-event-id': ev.id },
        td(fmtTime(ev.accepted_at)),
        td(ev.id, 'mono'),
        td(ev.type),
        td(ev.tenant),
        td(ev.entity, 'mono'),
        td(num(ev.revision), 'num'),
        td(`${ev.partition} / ${ev.offset}`, 'num'),
        td(clip(data, 120), 'clip mono', clip(data, 2000) || undefined));
    },
  });
  page.search();
}

// ---------------------------------------------------------------- inbound

// The listing is the only place with a request's outcome (GET
// /v1/inbound/requests/{id} is the capture as received), so the items
// listed are kept here for the request page. Bounded: cleared when large.
const inboundItems = new Map();
function rememberItem(it) {
  if (!it || !it.id) return;
  if (inboundItems.size > 5000) inboundItems.clear();
  inboundItems.set(it.id, it);
}

const requestLink = (id) => el('a', { href: '#/inbound/requests/' + encodeURIComponent(id), class: 'mono', text: id });
const inboundBadge = (status) => badge([status || 'unknown', INBOUND_COLOURS[status] || 'grey']);

function fmtBytes(n) {
  if (typeof n !== 'number') return '—';
  if (n < 1024) return n + ' B';
  if (n < 1 << 20) return (n / 1024).toFixed(n < 10240 ? 1 : 0) + ' KiB';
  return (n / (1 << 20)).toFixed(1) + ' MiB';
}

function hourAgo() { return new Date(Date.now() - 3600e3).toISOString(); }

// replayPanel starts a re-verify or re-publish job, follows it, then
// lists the outcomes of the copies it made (GET /v1/inbound/requests?job=).
function replayPanel(ctx) {
  const progress = jobProgress(ctx, {
    prefix: 'replay', title: 'Replay', submit: '/v1/inbound/replays', poll: '/v1/inbound/replays/',
    counts: [['matched', 'matched'], ['replayed', 'replayed'], ['skipped', 'skipped'],
      ['already replayed', 'already_replayed'], ['scanned', 'scanned']],
    done: (job) => `Replay done: ${num(job.replayed)} copied for verification, ${num(job.skipped)} skipped.`,
  });
  const body = el('tbody', { id: 'replay-outcomes-body' });
  const note = el('p', { class: 'muted small', id: 'replay-outcomes-note' });
  const outcomes = el('div', { id: 'replay-outcomes', class: 'outcomes', hidden: true },
    el('h2', { text: 'Outcomes of the copies' }), note,
    el('div', { class: 'tablewrap' }, el('table', {},
      el('thead', {}, el('tr', {}, th('Copy'), th('Of'), th('Status'), th('Reason / event'), th('Decided'))), body)));

  // Each copy is verified by the verify stage like any capture: poll its
  // job's listing until every copy is decided (or a minute passed).
  const follow = async (job) => {
    outcomes.hidden = false;
    delete outcomes.dataset.complete;
    const since = new Date(new Date(job.started_at).getTime() - 60e3).toISOString();
    const link = el('a', { href: `#/inbound?${new URLSearchParams({ job: job.id, since })}`, text: 'open them in the listing' });
    for (let i = 0; i < 60 && ctx.alive; i++) {
      const page = await api('GET', '/v1/inbound/requests?' + new URLSearchParams({ job: job.id, since, limit: '100' }));
      if (!ctx.alive) return;
      const items = page.data || [];
      items.forEach(rememberItem);
      body.replaceChildren(...items.map((it) => el('tr', { 'data-request-id': it.id, 'data-status': it.status },
        td(requestLink(it.id)),
        td(it.replay_of ? requestLink(it.replay_of) : '—'),
        td(inboundBadge(it.status)),
        td(it.reason ? [el('span', { class: 'mono', text: it.reason }), el('span', { class: 'sub', title: it.detail, text: it.detail || '' })]
          : it.event_type ? [el('span', { text: it.event_type }), el('span', { class: 'sub mono', text: it.event_id || '' })] : '—'),
        td(fmtTime(it.verified_at)))));
      if (!items.length) body.replaceChildren(el('tr', {}, el('td', { class: 'empty', colspan: 5, text: 'Waiting for the verify stage…' })));
      const pending = items.filter((it) => it.status === 'pending').length;
      const complete = items.length >= job.replayed && pending === 0;
      note.replaceChildren(complete
        ? `${num(items.length)} ${items.length === 1 ? 'copy' : 'copies'} decided; `
        : `${num(items.length - pending)} of ${num(job.replayed)} decided so far; `, link, '.');
      if (complete || items.length >= 100) { outcomes.dataset.complete = 'true'; return; }
      await ctx.sleep(POLL_MS);
    }
  };

  return {
    node: el('div', {}, progress.node, outcomes),
    async start(request) {
      const job = await progress.start(request);
      if (job && job.status === 'done' && job.replayed > 0) await follow(job);
      else if (job) { outcomes.hidden = true; }
    },
  };
}

function sourcesTable(ctx) {
  const body = el('tbody', { id: 'inbound-sources-body' }, el('tr', {}, el('td', { class: 'empty', colspan: 8, text: 'Loading…' })));
  const list = el('datalist', { id: 'inbound-sources-list' });
  const node = el('section', { class: 'panel', id: 'inbound-sources' },
    el('h2', { text: 'Sources' }),
    el('div', { class: 'tablewrap' }, el('table', {},
      el('thead', {}, el('tr', {}, th('Source'), th('Kind'), th('Tenant'), th('Event type'), th('Entity'),
        th('Max body', 'num'), th('Tolerance', 'num'), th('Secret'))), body)),
    list);
  api('GET', '/v1/inbound/sources').then((res) => {
    if (!ctx.alive) return;
    const sources = res.data || [];
    list.replaceChildren(...sources.map((src) => el('option', { value: src.id, text: `${src.kind} · ${src.tenant}` })));
    if (!sources.length) {
      body.replaceChildren(el('tr', {}, el('td', { class: 'empty', colspan: 8,
        text: 'No sources yet. Create one with POST /v1/inbound/sources (see docs/inbound.md).' })));
      return;
    }
    body.replaceChildren(...sources.map((src) => {
      const mapped = Object.keys(src.type_map || {}).length;
      return el('tr', { 'data-source-id': src.id },
        td([el('a', { href: `#/inbound?${new URLSearchParams({ source: src.id, since: hourAgo() })}`, class: 'mono', text: src.id,
          title: 'Requests of the last hour' }),
        el('span', { class: 'sub mono', text: 'POST ' + src.capture_path,
          title: src.has_capture_token ? 'A private capture URL: the token is shown by GET /v1/inbound/sources/{id}/secret' : undefined })]),
        td(src.kind),
        td(src.tenant),
        td([el('span', { class: 'mono', text: `${src.type_prefix}‹${src.type_field}›` }),
          mapped ? el('span', { class: 'sub', text: `${mapped} renamed` }) : null]),
        td(src.entity_field, 'mono'),
        td(fmtBytes(src.max_body_bytes), 'num'),
        td(fmtAge(src.tolerance_seconds), 'num'),
        td(src.has_previous_secret ? badge(['rotating', 'amber']) : el('span', { class: 'muted', text: 'one secret' }),
          undefined, src.has_previous_secret ? 'The previous secret is still accepted' : undefined));
    }));
  }, (e) => {
    if (!ctx.alive) return;
    fail(e);
    body.replaceChildren(el('tr', {}, el('td', { class: 'empty', colspan: 8, text: 'Could not load the sources: ' + e.message })));
  });
  return node;
}

function inboundPage(ctx, params) {
  const fresh = ![...params.keys()].length;
  const source = el('input', { id: 'inbound-source', list: 'inbound-sources-list', placeholder: 'any', value: params.get('source') || '', class: 'mono' });
  const status = el('select', { id: 'inbound-status' }, el('option', { value: '', text: 'any' }),
    ...INBOUND_STATUSES.map((st) => el('option', { value: st, text: st })));
  status.value = params.get('status') || '';
  const job = el('input', { id: 'inbound-job', placeholder: 'any', value: params.get('job') || '', class: 'mono' });
  const since = el('input', { id: 'inbound-since', type: 'datetime-local',
    value: isoToLocalInput(params.get('since')) || (fresh ? toLocalInput(new Date(Date.now() - 3600e3)) : '') });
  const until = el('input', { id: 'inbound-until', type: 'datetime-local', value: isoToLocalInput(params.get('until')) });
  const action = el('select', { id: 'replay-action', 'aria-label': 'Replay action' },
    el('option', { value: 'reverify', text: 'Re-verify' }), el('option', { value: 'republish', text: 'Re-publish' }));
  const replay = replayPanel(ctx);

  const filters = () => searchParams({
    source: source.value.trim(), status: status.value, job: job.value.trim(),
    since: fromLocalInput(since.value), until: fromLocalInput(until.value),
  });
  let searched = new URLSearchParams(); // the filters of the results shown
  const bulk = bulkActions({
    id: 'replay', selectAllId: 'inbound-select-all', verb: 'Replay', attr: 'request-id',
    whyNotAll: () => {
      if (!searched.get('since')) return 'Set a start time to replay every request of a time range.';
      if (searched.get('status') === 'pending') return 'Pending requests are verified anyway.';
      if (searched.get('job')) return 'A replay job cannot be selected by job; tick the requests instead.';
      return '';
    },
    allHint: 'Replays every decided request matching these filters, not only those shown.',
    submitSelected: (ids) => replay.start({ action: action.value, ids }),
    submitAll: () => {
      const req = { action: action.value };
      for (const k of ['source', 'status', 'since', 'until']) if (searched.get(k)) req[k] = searched.get(k);
      return replay.start(req);
    },
  });

  const page = searchPage(ctx, {
    id: 'inbound', title: 'Inbound', path: '/v1/inbound/requests',
    subtitle: 'Webhooks that third parties sent to /in/{source}: stored as received, then verified, de-duplicated and forwarded as events.',
    before: [sourcesTable(ctx)],
    fields: [
      el('label', {}, 'Source', source),
      el('label', {}, 'Status', status),
      el('label', {}, 'Decided after', since),
      el('label', {}, 'Decided before', until),
      el('label', {}, 'Replay job', job),
    ],
    extra: [el('div', { class: 'panel' }, el('div', { class: 'actions' }, action, ...bulk.buttons), replay.node)],
    columns: [bulk.header, th('Received'), th('Request'), th('Status'), th('Reason'), th('Event'),
      th('Body', 'num'), th('Replay'), th('Decided')],
    empty: 'No requests match.',
    query: () => { searched = filters(); return searched; },
    onResults: bulk.reset,
    row: (it) => {
      rememberItem(it);
      let reason = '—';
      if (it.reason) reason = [el('span', { class: 'mono', text: it.reason }), el('span', { class: 'sub', title: it.detail, text: it.detail || '' })];
      else if (it.duplicate_of) reason = el('span', {}, 'duplicate of ', requestLink(it.duplicate_of));
      return el('tr', { 'data-request-id': it.id, 'data-status': it.status },
        td(bulk.checkbox(it.id)),
        td(fmtTime(it.received_at)),
        td([requestLink(it.id), el('span', { class: 'sub', title: it.path, text: `${it.source} · ${it.method} ${it.path}` })]),
        td(inboundBadge(it.status)),
        td(reason, 'reason'),
        td(it.event_type ? [el('span', { text: it.event_type }), el('span', { class: 'sub mono', text: it.entity || '' })] : '—'),
        td(fmtBytes(it.body_bytes), 'num'),
        td(it.replay_of ? [el('span', {}, `${it.action} of `, requestLink(it.replay_of)), el('span', { class: 'sub mono', text: it.job || '' })] : '—'),
        td(fmtTime(it.verified_at)));
    },
  });
  bulk.update();
  page.search();
}

// findOutcome looks a request's outcome up in its source's listing from
// its receipt on (a bounded scan: the API has no outcome by id).
async function findOutcome(ctx, req) {
  const since = new Date(new Date(req.received_at).getTime() - 1000).toISOString();
  let cursor = '';
  for (let pages = 0; pages < 5 && ctx.alive; pages++) {
    const p = new URLSearchParams({ source: req.source, since, limit: '1000' });
    if (cursor) p.set('cursor', cursor);
    const page = await api('GET', '/v1/inbound/requests?' + p);
    const hit = (page.data || []).find((it) => it.id === req.id);
    if (hit) return hit;
    cursor = page.next_cursor;
    if (!cursor) break;
  }
  return null;
}

// detailHead is the head of a page about one item: a link back to its
// list, the item's id and its state badge.
function detailHead(listHref, listName, id, state) {
  return el('div', { class: 'pagehead' }, el('div', { class: 'grow' },
    el('div', { class: 'small' }, el('a', { href: listHref, text: '← ' + listName })),
    el('h1', {}, el('span', { class: 'mono', text: id }), state)));
}

function inboundRequestPage(ctx, id) {
  const path = '/v1/inbound/requests/' + encodeURIComponent(id);
  const state = el('span', { id: 'request-status' });
  const outcome = el('dl', { class: 'kv', id: 'request-outcome' }, ...kv([['Status', 'Loading…']]));
  const meta = el('dl', { class: 'kv', id: 'request-meta' });
  const headers = el('tbody', { id: 'request-headers' });
  const bodyNote = el('p', { class: 'muted small', id: 'request-body-note' });
  const bodyPre = el('pre', { class: 'body', id: 'request-body' });
  const pretty = el('input', { type: 'checkbox', id: 'body-pretty' });
  const download = el('button', { type: 'button', id: 'body-download', text: 'Download body' });
  const reverifyBtn = el('button', { type: 'button', id: 'replay-reverify', class: 'primary', text: 'Re-verify' });
  const republishBtn = el('button', { type: 'button', id: 'replay-republish', text: 'Re-publish' });
  const replayNote = el('p', { class: 'muted small', id: 'replay-note',
    text: 'Re-verify checks a copy with the source\'s current secrets and mapping and forwards it unless it was forwarded before. ' +
      'Re-publish forwards it again even so, with the same event id.' });
  const replay = replayPanel(ctx);

  view.replaceChildren(
    detailHead('#/inbound', 'Inbound', id, state),
    el('div', { class: 'grid' },
      el('section', { class: 'panel' }, el('h2', { text: 'Outcome' }), outcome),
      el('section', { class: 'panel' }, el('h2', { text: 'Replay' }), replayNote,
        el('div', { class: 'actions' }, reverifyBtn, republishBtn), replay.node)),
    el('div', { class: 'grid' },
      el('section', { class: 'panel' }, el('h2', { text: 'Request' }), meta),
      el('section', { class: 'panel' }, el('h2', { text: 'Headers' }),
        el('div', { class: 'tablewrap' }, el('table', { class: 'headers' },
          el('thead', {}, el('tr', {}, th('Name'), th('Value'))), headers)))),
    el('section', { class: 'panel' },
      el('div', { class: 'actions' }, el('h2', { class: 'grow', text: 'Body' }),
        el('label', { class: 'check' }, pretty, 'Reformat JSON'), download),
      bodyNote, bodyPre));

  let req = null;
  const drawBody = () => {
    if (!req) return;
    const text = req.body !== undefined ? req.body : null;
    let shown = text !== null ? text : req.body_base64;
    pretty.disabled = text === null;
    if (pretty.checked && text !== null) {
      try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch { /* not JSON: as received */ }
    }
    const notes = [req.body_bytes < 1024 ? `${num(req.body_bytes)} bytes` : `${fmtBytes(req.body_bytes)} (${num(req.body_bytes)} bytes)`];
    if (text === null) notes.push('not UTF-8 text: shown as base64');
    else if (pretty.checked) notes.push('reformatted; untick to see the bytes as received');
    if (req.refused === 'missing_signature') notes.push('refused at the door before its body was read');
    else if (req.refused) notes.push(req.truncated ? 'refused at the door: only the first bytes were kept' : 'refused at the door: kept whole, for forensics only');
    bodyNote.textContent = notes.join(' · ');
    bodyPre.textContent = shown; // text, never HTML
  };
  pretty.addEventListener('change', drawBody);

  const drawOutcome = (it) => {
    if (!it) {
      state.replaceChildren(badge(['unknown', 'grey'], 'big'));
      outcome.replaceChildren(...kv([['Status', 'Not found in the first 5,000 records of its source after its receipt. Search the listing.']]));
      return;
    }
    state.replaceChildren(badge([it.status, INBOUND_COLOURS[it.status] || 'grey'], 'big'));
    const rows = [['Status', inboundBadge(it.status)]];
    if (it.reason) rows.push(['Reason', el('span', { class: 'mono', id: 'request-reason', text: it.reason })]);
    if (it.detail) rows.push(['Detail', it.detail]);
    rows.push(['Received', fmtTime(it.received_at)], ['Decided', fmtTime(it.verified_at)]);
    if (it.dedup_key) rows.push(['Dedup key', el('span', { class: 'mono', text: it.dedup_key })]);
    if (it.duplicate_of) rows.push(['Duplicate of', requestLink(it.duplicate_of)]);
    if (it.event_id) rows.push(['Event', el('span', { class: 'mono', text: it.event_id })], ['Type', it.event_type || '—'], ['Entity', it.entity || '—']);
    outcome.replaceChildren(...kv(rows));
  };

  const load = async () => {
    try {
      req = await api('GET', path);
    } catch (e) {
      if (!ctx.alive) return;
      if (e.status === 404) view.replaceChildren(el('p', { class: 'notice error', text: `Request ${id} not found (or expired).` }));
      else fail(e);
      return;
    }
    if (!ctx.alive) return;
    const refused = !!req.refused;
    reverifyBtn.disabled = refused;
    republishBtn.disabled = refused;
    if (refused) replayNote.textContent = 'Refused at the door (' + req.refused + '): only its metadata was kept, so it cannot be ' +
      're-verified or re-published; the sender was answered with the refusal.';
    const m = [
      ['Source', el('a', { href: `#/inbound?${new URLSearchParams({ source: req.source, since: hourAgo() })}`, class: 'mono', text: req.source })],
      ['Method', req.method],
      ['Path', el('span', { class: 'mono', text: req.path })],
      ['Host', req.host],
      ['Remote address', el('span', { class: 'mono', text: req.remote_addr })],
      ['Received', fmtTime(req.received_at)],
      ['Body', req.truncated ? `first ${num(req.body_bytes)} bytes kept` : `${num(req.body_bytes)} bytes`],
    ];
    if (req.refused) m.push(['Refused', `${req.refused}${req.detail ? ': ' + req.detail : ''}`]);
    if (req.replay_of) m.push(['Copy of', requestLink(req.replay_of)], ['Replay', `${req.action} · ${req.job}`]);
    meta.replaceChildren(...kv(m));
    const names = Object.keys(req.headers || {}).sort((a, b) => a.toLowerCase().localeCompare(b.toLowerCase()));
    headers.replaceChildren(...names.flatMap((name) => req.headers[name].map((v) =>
      el('tr', { 'data-header': name }, td(name, 'mono'), td(v, 'mono value')))));
    if (!names.length) headers.replaceChildren(el('tr', {}, el('td', { class: 'empty', colspan: 2, text: 'No headers.' })));
    drawBody();

    // The outcome: from the listing the operator came from, else found
    // in it; looked up again while the request is pending.
    let it = inboundItems.get(id);
    for (let i = 0; ctx.alive; i++) {
      if (!it || it.status === 'pending') {
        try {
          it = (await findOutcome(ctx, req)) || it;
        } catch (e) {
          if (ctx.alive) fail(e);
          return;
        }
      }
      if (!ctx.alive) return;
      rememberItem(it);
      drawOutcome(it);
      if (!it || it.status !== 'pending' || i >= 30) return;
      await ctx.sleep(REFRESH_MS);
    }
  };

  download.addEventListener('click', () => act(download, async () => {
    const res = await apiFetch('GET', path + '/body', undefined, { Accept: 'application/octet-stream' });
    const url = URL.createObjectURL(await res.blob());
    const a = el('a', { href: url, download: id + '.body', hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60e3);
  }));
  reverifyBtn.addEventListener('click', () => act(reverifyBtn, () => replay.start({ action: 'reverify', ids: [id] })));
  republishBtn.addEventListener('click', () => act(republishBtn, () => replay.start({ action: 'republish', ids: [id] })));

  load();
}

// ---------------------------------------------------------------- start

updateSignout();
route();

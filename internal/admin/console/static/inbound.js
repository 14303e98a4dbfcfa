// Laneway console: the inbound pages (the sources and requests, one
// request). The DOM helpers, the API client and the router are in
// console.js, which the page loads first.
'use strict';

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

// Laneway console: the endpoints list and the endpoint page. The DOM
// helpers, the API client and the router are in console.js, which the
// page loads first.
'use strict';

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

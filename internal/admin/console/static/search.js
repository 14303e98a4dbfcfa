// Laneway console: the progress panels of jobs (redrive, replay) and the
// search pages (dead letters, events). The DOM helpers, the API client and
// the router are in console.js, which the page loads first.
'use strict';

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

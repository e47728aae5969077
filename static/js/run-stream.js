// The run page's live stream (htmx's SSE extension, templates/gpus/runs/detail.html).
// - Remembers the last event each message carried, so that a reconnection the extension
//   makes itself (after an error) resumes after it instead of the page's first ?after=
//   (the browser's own reconnections send Last-Event-ID), and drops a message seen already.
// - Mirrors the run's status onto #run-progress (data-status), as the page had it on load.
// - Keeps the keyboard focus: when the run ends and the button that had the focus is gone
//   (Cancel), the focus goes to the outcome, which says what happened and what next.
// - Falls back to polling when the server refuses the stream (too many open: 429 or 503 with
//   Retry-After, which an EventSource never retries by itself): the region asks for the run's
//   progress every data-poll-seconds, as the page did before it streamed; a changed progress
//   comes back as the whole region, which opens the stream again; 204 (nothing new) keeps it.
// - Hands the extension the stream js/run-stream-early.js opened while the page loaded, with
//   the events that came before it listened, in order, less those the page already lists (a
//   closed one is opened again).
(function () {
  'use strict';
  const root = () => document.getElementById('run-progress');
  let focusedId = null;

  // The events and announcements of a message that the page already shows (its rows were read
  // after the early stream opened): dropped before the message is swapped in. The step rows and
  // the status in it are the newer state, and are kept.
  const unshown = (data) => {
    const box = root();
    const last = Number((box && box.dataset.lastSeq) || 0);
    const parsed = document.createElement('template');
    parsed.innerHTML = data;
    let dropped = false;
    parsed.content.querySelectorAll('[hx-swap-oob^="beforeend:"] > [data-seq]').forEach((el) => {
      if (Number(el.dataset.seq) <= last) {
        el.remove();
        dropped = true;
      }
    });
    return dropped ? parsed.innerHTML : data;
  };

  if (window.htmx) {
    const open = htmx.createEventSource || ((url) => new EventSource(url, { withCredentials: true }));
    const path = (url) => new URL(url, location.href).pathname;
    htmx.createEventSource = (url) => {
      window.brickStreamTaken = true;
      const early = window.brickEarlyStream;
      window.brickEarlyStream = null;
      if (!early || path(early.url) !== path(url) || early.source.readyState === EventSource.CLOSED) {
        if (early) early.source.close();
        return open(url);
      }
      // After the extension has registered its listeners (this runs while it processes the page).
      window.setTimeout(() => {
        early.holding = false;
        const source = early.source;
        if (early.opened && source.readyState === EventSource.OPEN) source.dispatchEvent(new Event('open'));
        for (const evt of early.held) {
          const data = evt.type === 'step' ? unshown(evt.data) : evt.data;
          source.dispatchEvent(new MessageEvent(evt.type, { data, lastEventId: evt.lastEventId, origin: evt.origin }));
        }
        early.held = [];
      }, 0);
      return early.source;
    };
  }

  document.addEventListener('htmx:sseBeforeMessage', (evt) => {
    const box = root();
    const id = Number(evt.detail.lastEventId);
    if (box && id && id <= Number(box.dataset.lastSeq || 0)) {
      evt.preventDefault();
      return;
    }
    const active = document.activeElement;
    focusedId = active && active !== document.body && active.id ? active.id : null;
  });

  document.addEventListener('htmx:sseError', (evt) => {
    const box = root();
    const source = evt.detail && evt.detail.source;
    // CONNECTING: the browser reconnects by itself (a dropped or ended stream). CLOSED: refused.
    if (!box || evt.target !== box || !source || source.readyState !== EventSource.CLOSED) return;
    if (!box.dataset.progress) return;
    const poll = new URL(box.dataset.progress, location.href);
    poll.searchParams.set('after', box.dataset.lastSeq || '0');
    poll.searchParams.set('status', box.dataset.status || '');
    const polling = box.cloneNode(true);
    for (const name of ['hx-ext', 'sse-connect', 'sse-close']) polling.removeAttribute(name);
    polling.querySelectorAll('[sse-swap]').forEach((el) => el.remove());
    polling.setAttribute('hx-get', poll.pathname + poll.search);
    polling.setAttribute('hx-trigger', 'every ' + (Number(box.dataset.pollSeconds) || 10) + 's');
    polling.setAttribute('hx-swap', 'outerHTML');
    const active = document.activeElement;
    const focused = active && box.contains(active) && active.id ? active.id : null;
    // Out of the document, the old region is dropped by the extension: it does not reconnect.
    box.replaceWith(polling);
    htmx.process(polling);
    const back = focused && document.getElementById(focused);
    if (back) back.focus();
  });

  document.addEventListener('htmx:sseMessage', (evt) => {
    const box = root();
    if (!box) return;
    // An event the page already listed, come again over the early stream after htmx took it
    // over (its message was on its way): the first one stays.
    const listed = new Set();
    box.querySelectorAll('#run-events > li[id]').forEach((li) => {
      if (listed.has(li.id)) li.remove();
      else listed.add(li.id);
    });
    const id = Number(evt.detail.lastEventId);
    if (id) {
      box.dataset.lastSeq = String(id);
      const url = new URL(box.getAttribute('sse-connect'), location.href);
      url.searchParams.set('after', String(id));
      box.setAttribute('sse-connect', url.pathname + url.search);
    }
    const status = document.getElementById('run-status');
    if (status && status.dataset.status) box.dataset.status = status.dataset.status;
    const active = document.activeElement;
    if (focusedId && (!active || active === document.body)) {
      const back = document.getElementById(focusedId) || document.getElementById('run-message')
        || document.getElementById('what-next-title') || document.getElementById('run-status');
      if (back) {
        if (!back.matches('a, button, input, select, textarea, summary, [tabindex]')) back.setAttribute('tabindex', '-1');
        back.focus();
      }
    }
    focusedId = null;
  });
})();

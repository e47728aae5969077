// The run page's stream, opened as soon as its region is parsed (a plain script placed right
// after it, templates/gpus/runs/detail.html), not once the deferred scripts and htmx have
// loaded: the rows committed while the page was still loading arrive that much sooner.
// htmx's SSE extension then takes this EventSource over (js/run-stream.js); what arrived
// before it listened is held here and handed to it in order.
(function () {
  'use strict';
  const box = document.getElementById('run-progress');
  const url = box && box.getAttribute('sse-connect');
  if (!url || !window.EventSource) return;
  const source = new EventSource(url, { withCredentials: true });
  const early = { url, source, held: [], holding: true, opened: false };
  const hold = (evt) => {
    if (!early.holding) return;
    early.held.push(evt);
    evt.stopImmediatePropagation();
  };
  for (const type of ['step', 'done']) source.addEventListener(type, hold);
  source.addEventListener('open', () => { early.opened = true; });
  window.brickEarlyStream = early;
})();

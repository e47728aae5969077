// The run page's stream, opened by this script as soon as the browser reaches it: it comes
// before the page's progress region (templates/gpus/runs/detail.html), whose rows the server
// reads only after sending the page up to here (gpus/views/runs.py, run_detail). So the stream
// is already open when those rows are read: a row committed after them comes over it at once,
// where before it waited for the region, the deferred scripts and htmx. The stream starts after
// the rows the server had when it sent this script (data-stream's ?after=); the region may show
// a few more, which js/run-stream.js drops when it hands the stream to htmx's SSE extension,
// with the events that came before it listened, in order.
(function () {
  'use strict';
  const script = document.currentScript;
  const url = script && script.dataset.stream;
  if (!url || !window.EventSource || window.brickStreamTaken) return;
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

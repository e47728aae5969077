/* Ask once before what cannot be taken back: a form (or its submit button) with
   data-confirm="One sentence saying what will happen." is only submitted when the
   person says OK. Delegated from the document, so forms swapped in by htmx are covered. */
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement)) return;
    var button = event.submitter;
    var message = (button && button.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
    if (message && !window.confirm(message)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);
})();

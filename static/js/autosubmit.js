/* A <select data-autosubmit> submits its form when changed (a filter, the language), in place of
   an inline onchange, which the Content-Security-Policy refuses. Delegated from the document. */
(function () {
  "use strict";
  document.addEventListener("change", function (event) {
    var field = event.target;
    if (field instanceof HTMLSelectElement && field.hasAttribute("data-autosubmit") && field.form) {
      field.form.requestSubmit();
    }
  });
})();

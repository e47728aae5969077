/* Ask once before what cannot be taken back: a form (or its submit button) with
   data-confirm="One sentence saying what will happen." is only submitted when the
   person says OK; with data-confirm-choice, the sentence of the option chosen. The browser
   checks the form's fields first (required, custom validity): the question comes after. Delegated from the document, so forms swapped in by htmx are covered. */
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement)) return;
    var button = event.submitter;
    var message = (button && button.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
    // data-confirm-choice="<radio name>": the chosen option's own sentence (it names what was chosen).
    var choice = form.getAttribute("data-confirm-choice");
    if (choice && !(button && button.hasAttribute("data-confirm"))) {
      var picked = form.querySelector('input[type=radio][name="' + CSS.escape(choice) + '"]:checked');
      if (picked && picked.getAttribute("data-confirm")) message = picked.getAttribute("data-confirm");
    }
    if (message && !window.confirm(message)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);
})();

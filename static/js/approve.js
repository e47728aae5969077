/* Approving a Workspace: before the browser checks the form (and so before the confirmation
   question), a GPU type with fewer available than requested (data-fits="no") needs the
   overcommit box ticked; the box says why when it is not. The server checks it again. */
(function () {
  "use strict";
  if (window.brickApprove) return;
  window.brickApprove = true;
  function check(form) {
    var boxes = form.querySelectorAll("input[type=checkbox][data-overcommit]");
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i];
      var prefix = box.name.slice(0, box.name.length - "overcommit".length);
      var picked = form.querySelector('input[type=radio][name="' + CSS.escape(prefix + "resource") + '"]:checked');
      var short = picked && picked.getAttribute("data-fits") === "no";
      box.setCustomValidity(short && !box.checked ? box.getAttribute("data-overcommit") : "");
    }
  }
  // A click on a submit button comes before the browser's own check of the fields.
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[type=submit], input[type=submit]");
    if (button && button.form) check(button.form);
  }, true);
  document.addEventListener("change", function (event) {
    if (event.target.form) check(event.target.form);
  });
})();

/* A button with data-copy="<element id>" copies that element's text to the clipboard and
   says so on itself for a moment (data-copied); where the clipboard is not allowed (a page
   not served over HTTPS), the text is selected so Ctrl-C copies it. */
(function () {
  "use strict";
  if (window.brickCopy) return;
  window.brickCopy = true;
  function select(el) {
    var range = document.createRange();
    range.selectNodeContents(el);
    var sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) return;
    var label = button.textContent;
    function done() {
      button.textContent = button.getAttribute("data-copied") || label;
      button.setAttribute("data-state", "copied");
      setTimeout(function () { button.textContent = label; button.removeAttribute("data-state"); }, 2000);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(source.textContent).then(done, function () { select(source); });
    } else {
      select(source);
    }
  });
})();

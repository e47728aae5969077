// The header's menus on a phone (static/css/brickadmin.css, max-width 600px): folded behind the
// Menu button, a disclosure (aria-expanded) that Escape closes. The button only shows once this
// script runs (the class js-menu on <html>), so without JS the menus are simply open.
(function () {
  "use strict";

  function setOpen(button, open) {
    document.documentElement.classList.toggle("menu-open", open);
    button.setAttribute("aria-expanded", open ? "true" : "false");
  }

  function start() {
    var button = document.querySelector(".menu-toggle");
    if (!button) return;
    document.documentElement.classList.add("js-menu");
    button.addEventListener("click", function () {
      setOpen(button, button.getAttribute("aria-expanded") !== "true");
    });
    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && button.getAttribute("aria-expanded") === "true") {
        setOpen(button, false);
        button.focus();
      }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

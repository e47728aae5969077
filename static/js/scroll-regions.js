// Wide tables scroll sideways inside their .table-scroll wrapper (static/css/brickadmin.css),
// never the whole page. A wrapper that really scrolls (a phone, a long table) is made reachable
// from the keyboard and named, so it can be scrolled without a mouse (WCAG 2.1.1; axe's rule
// scrollable-region-focusable): tabindex 0, role region, named by its table's caption or the
// heading before it. A <pre> that scrolls (a manifest, a step's output) gets tabindex 0.
// Re-checked on resize and after every htmx swap.
(function () {
  "use strict";

  function nameFor(box) {
    var table = box.querySelector("table");
    if (table && table.caption && table.caption.textContent.trim()) return table.caption.textContent.trim();
    var headings = document.querySelectorAll("h1, h2, h3"), name = "";
    for (var i = 0; i < headings.length; i++) {
      if (headings[i].compareDocumentPosition(box) & Node.DOCUMENT_POSITION_FOLLOWING) {
        name = headings[i].textContent.replace(/\s+/g, " ").trim();
      }
    }
    return name || document.title;
  }

  // A landmark's name as assistive technology reads it (aria-label, else aria-labelledby).
  function landmarkName(el) {
    if (el.hasAttribute("aria-label")) return el.getAttribute("aria-label").trim();
    var ids = (el.getAttribute("aria-labelledby") || "").split(/\s+/), text = [];
    for (var i = 0; i < ids.length; i++) {
      var ref = ids[i] && document.getElementById(ids[i]);
      if (ref) text.push(ref.textContent.replace(/\s+/g, " ").trim());
    }
    return text.join(" ");
  }

  // Landmarks stay unique at every width: a region named like another one (a heading's
  // section, another wide table after the same heading) is told apart by a number.
  function uniqueName(name, box) {
    var taken = {}, others = document.querySelectorAll("[role=region], section[aria-label], section[aria-labelledby]");
    for (var i = 0; i < others.length; i++) {
      if (others[i] !== box) taken[landmarkName(others[i])] = true;
    }
    if (!taken[name]) return name;
    for (var n = 2; ; n++) {
      if (!taken[name + " (" + n + ")"]) return name + " (" + n + ")";
    }
  }

  function update() {
    var boxes = document.querySelectorAll(".table-scroll, pre");
    for (var i = 0; i < boxes.length; i++) {
      var box = boxes[i], isTable = box.classList.contains("table-scroll");
      var scrolls = box.scrollWidth > box.clientWidth + 1 || (!isTable && box.scrollHeight > box.clientHeight + 1);
      if (scrolls && !box.hasAttribute("data-scroll-region")) {
        box.setAttribute("data-scroll-region", "");
        box.setAttribute("tabindex", "0");
        if (isTable) {  // a <pre> is read as it is; a table's box says what it holds
          box.setAttribute("role", "region");
          if (!box.hasAttribute("aria-label")) box.setAttribute("aria-label", uniqueName(nameFor(box), box));
        }
      } else if (!scrolls && box.hasAttribute("data-scroll-region")) {
        box.removeAttribute("data-scroll-region");
        box.removeAttribute("tabindex");
        if (isTable) {
          box.removeAttribute("role");
          box.removeAttribute("aria-label");
        }
      }
    }
  }

  var pending = false;
  function soon() {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () { pending = false; update(); });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", update);
  else update();
  window.addEventListener("resize", soon);
  document.addEventListener("htmx:afterSettle", soon);
})();

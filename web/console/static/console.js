/* The Tollgate console's live parts, for the pages that ask for them through data-* attributes (no inline code, no
 * eval: the Content Security Policy allows this file and htmx alone).
 *
 * - [data-event-stream]: the page's one event stream (EventSource, resumed by the browser with Last-Event-ID). Each
 *   "row" or "gap" frame is a table row the server rendered: it goes on top of [data-event-rows] (keeping at most
 *   its data-max-rows), and "tollgate:event" is fired on the body; a "posture" frame fires "tollgate:posture"; a
 *   "rates" frame fills [data-rate=NAME]. htmx regions refresh on those events (hx-trigger "... from:body").
 * - [data-deadline]: an RFC 3339 instant; its text counts down the seconds left, and "tollgate:deadline" is fired
 *   on the body once it has passed.
 */
(function () {
  "use strict";

  var DEADLINE_MARGIN_MS = 250;  // the server decides at the deadline: ask a moment after it

  function fire(name) {
    document.body.dispatchEvent(new CustomEvent(name, { bubbles: true }));
  }

  function addRow(html) {
    var rows = document.querySelector("[data-event-rows]");
    if (!rows) {
      return;
    }
    var template = document.createElement("template");
    template.innerHTML = html.trim();
    var row = template.content.firstElementChild;
    if (!row) {
      return;
    }
    rows.insertBefore(row, rows.firstElementChild);
    var max = parseInt(rows.getAttribute("data-max-rows") || "50", 10);
    while (rows.children.length > max) {
      rows.removeChild(rows.lastElementChild);
    }
    var table = rows.closest("table");
    if (table) {
      table.hidden = false;
    }
    var empty = document.querySelector("[data-event-empty]");
    if (empty) {
      empty.hidden = true;
    }
  }

  function openStream() {
    var holder = document.querySelector("[data-event-stream]");
    if (!holder || !window.EventSource) {
      return;
    }
    var stream = new EventSource(holder.getAttribute("data-event-stream"));
    stream.addEventListener("row", function (e) { addRow(e.data); fire("tollgate:event"); });
    stream.addEventListener("gap", function (e) { addRow(e.data); fire("tollgate:event"); });
    stream.addEventListener("posture", function () { fire("tollgate:posture"); });
    stream.addEventListener("rates", function (e) {
      var rates = JSON.parse(e.data);
      Object.keys(rates).forEach(function (name) {
        var shown = document.querySelector('[data-rate="' + name + '"]');
        if (shown) {
          shown.textContent = String(rates[name]);
        }
      });
    });
    window.addEventListener("pagehide", function () { stream.close(); });
  }

  function tick() {
    var now = Date.now();
    var passed = false;
    document.querySelectorAll("[data-deadline]").forEach(function (shown) {
      var left = Date.parse(shown.getAttribute("data-deadline")) - now;
      shown.textContent = left > 0 ? "in " + Math.ceil(left / 1000) + " s" : "now";
      if (left <= -DEADLINE_MARGIN_MS && !shown.hasAttribute("data-passed")) {
        shown.setAttribute("data-passed", "");
        passed = true;
      }
    });
    if (passed) {
      fire("tollgate:deadline");
    }
  }

  function start() {
    openStream();
    tick();
    window.setInterval(tick, DEADLINE_MARGIN_MS);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
}());

// leaseq dashboard: refresh the live parts of a page without a full reload,
// and select-all for the job lists. Plain JS, no build step, no network but
// this app's own pages.
(function () {
  "use strict";
  var every = parseInt(document.body.getAttribute("data-refresh"), 10) || 2000;
  var status = document.querySelector("[data-live-status]");
  var failures = 0;

  function busy() {
    // Never swap the list under an operator's hands: a ticked box, a focused
    // field or a selection of text holds the refresh.
    if (document.hidden) return true;
    if (document.querySelector("[data-live] input[type=checkbox]:checked")) return true;
    var el = document.activeElement;
    if (el && el.closest && el.closest("[data-live]") && el.tagName !== "BODY" && el.tagName !== "A") return true;
    var sel = window.getSelection && window.getSelection();
    return !!(sel && String(sel).length);
  }

  function refresh() {
    var parts = document.querySelectorAll("[data-live][id]");
    if (!parts.length) return schedule();
    if (busy()) {
      // Counted, so a test (or a curious operator) can see the hold work.
      document.body.dataset.liveHeld = String((parseInt(document.body.dataset.liveHeld, 10) || 0) + 1);
      return schedule();
    }
    var jobs = Array.prototype.map.call(parts, function (part) {
      var url = new URL(window.location.href);
      url.searchParams.set("partial", part.id);
      return fetch(url.toString(), { credentials: "same-origin", headers: { "X-Leaseq-Live": "1" } })
        .then(function (r) {
          if (!r.ok) throw new Error("HTTP " + r.status);
          return r.text();
        })
        .then(function (html) { if (!busy()) part.innerHTML = html; });
    });
    Promise.all(jobs).then(function () {
      failures = 0;
      if (status) { status.textContent = "live · updated " + new Date().toLocaleTimeString(); status.className = ""; }
    }, function (err) {
      failures += 1;
      if (status) { status.textContent = "not updating: " + err.message; status.className = "stale"; }
    }).then(schedule);
  }

  function schedule() {
    window.setTimeout(refresh, every * Math.min(1 + failures, 10));
  }

  document.addEventListener("change", function (e) {
    var all = e.target.closest && e.target.closest("[data-pick-all]");
    if (!all) return;
    var form = all.closest("form");
    form.querySelectorAll("input[name=id]").forEach(function (box) { box.checked = all.checked; });
  });

  if (document.querySelector("[data-live][id]")) schedule();
})();

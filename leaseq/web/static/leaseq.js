// leaseq dashboard: refresh the live parts of a page without a full reload,
// and select-all for the job lists. Plain JS, no build step, no network but
// this app's own pages.
//
// Live by push: the page subscribes to /live (Server-Sent Events); each time
// the event stream of its queues moves, it fetches its live part once. One
// blocking read in the dashboard process serves every tab. Without
// EventSource, when /live says "poll" (the queue's events are off) or while
// the connection is down, it polls every data-refresh ms as before; while
// pushed, it still polls now and then (every 15 refreshes) as a safety net.
(function () {
  "use strict";
  var every = parseInt(document.body.getAttribute("data-refresh"), 10) || 2000;
  var base = document.body.getAttribute("data-base") || "";
  var queue = document.body.getAttribute("data-queue") || "";
  var status = document.querySelector("[data-live-status]");
  var failures = 0;
  var pushed = false;
  var timer = null;
  var inflight = false;
  var again = false;

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
    timer = null;
    var parts = document.querySelectorAll("[data-live][id]");
    if (!parts.length) return schedule();
    if (inflight) { again = true; return; }
    if (busy()) {
      // Counted, so a test (or a curious operator) can see the hold work.
      document.body.dataset.liveHeld = String((parseInt(document.body.dataset.liveHeld, 10) || 0) + 1);
      return schedule(true);  // a change is waiting: look again soon, pushed or not
    }
    inflight = true;
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
      document.body.dataset.liveUpdates = String((parseInt(document.body.dataset.liveUpdates, 10) || 0) + 1);
      if (status) {
        status.textContent = (pushed ? "live (push)" : "live (polling)") + " · updated " + new Date().toLocaleTimeString();
        status.className = "";
      }
    }, function (err) {
      failures += 1;
      if (status) { status.textContent = "not updating: " + err.message; status.className = "stale"; }
    }).then(function () {
      inflight = false;
      if (again) { again = false; return refresh(); }
      schedule();
    });
  }

  function schedule(held) {
    if (timer) window.clearTimeout(timer);
    var wait = pushed && !held ? every * 15 : every * Math.min(1 + failures, 10);
    timer = window.setTimeout(refresh, wait);
  }

  function now() {
    if (timer) window.clearTimeout(timer);
    timer = window.setTimeout(refresh, 50);  // a burst of pushes makes one fetch
  }

  function subscribe() {
    if (!window.EventSource) return;
    var url = base + "/live" + (queue ? "?queue=" + encodeURIComponent(queue) : "");
    var source = new EventSource(url);
    source.addEventListener("hello", function () {
      pushed = true;
      document.body.dataset.live = "push";
      schedule();
    });
    source.addEventListener("moved", now);
    source.addEventListener("poll", function () {
      source.close();
      pushed = false;
      document.body.dataset.live = "poll";
      schedule();
    });
    source.onerror = function () {
      // EventSource reconnects by itself; meanwhile, poll.
      if (pushed) { pushed = false; document.body.dataset.live = "poll"; schedule(); }
    };
  }

  document.addEventListener("change", function (e) {
    var all = e.target.closest && e.target.closest("[data-pick-all]");
    if (!all) return;
    var form = all.closest("form");
    form.querySelectorAll("input[name=id]").forEach(function (box) { box.checked = all.checked; });
  });

  // A bulk action over a filter answers with its progress and a form that goes
  // on from where it stopped: submit it by itself (the page says so; "Stop
  // here" is a plain link, so a click on it while the next part runs leaves).
  var goOn = document.querySelector("form[data-continue]");
  if (goOn) window.setTimeout(function () { goOn.submit(); }, 400);

  if (document.querySelector("[data-live][id]")) {
    schedule();
    subscribe();
  }
})();

"""The dashboard in a real browser: headless Chromium (Debian's package) driven by
Playwright, against `leaseq web`'s app served by uvicorn on a real redis-server.

It checks what an operator does: the overview lists the queues with their
counts and refreshes them by itself, a state's list pages through the index,
a job page shows its fields, and actions work only when allowed and update
the list; every page at a laptop's and a phone's size passes axe-core (no
serious or critical violation), fits the screen, and the navigation and an
action are reachable by keyboard. Screenshots go to a temporary folder
($LEASEQ_SHOTS, else a new one; its path is printed); with
LEASEQ_UPDATE_SCREENSHOT=1 the overview, a dead job and the workers page also
replace the README's pictures in docs/img/ (never by default, so a test run
leaves the work tree as it was).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import leaseq
from tests.support import handlers
from tests.support.servers import RedisServer, wait_until

ROOT = Path(__file__).resolve().parents[2]


CHROMIUM = os.environ.get("LEASEQ_CHROMIUM", "/usr/bin/chromium")


ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


SHOTS = Path(os.environ.get("LEASEQ_SHOTS") or tempfile.mkdtemp(prefix="leaseq-shots-"))


class Served:
    """The dashboard app on uvicorn in a thread, on a free loopback port."""

    def __init__(self, client: Any, **options: Any) -> None:
        import uvicorn

        from leaseq.web import create_app

        # The socket bound here and handed over: a port picked free and bound later
        # by uvicorn can be taken meanwhile by another test of a parallel pass.
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        options.setdefault("refresh", 0.5)
        app = create_app(client, **options)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )
        self.thread.start()
        wait_until(lambda: self.server.started, 10, what="uvicorn to start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.fail(
            f"headless Chromium is needed for the dashboard test and {CHROMIUM} is missing: "
            "apt-get install -y chromium (or set LEASEQ_CHROMIUM)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[Any]:
    c = redis.Redis(port=redis_server.port)
    c.flushall()
    yield c
    c.close()


def seed(client: Any) -> tuple[leaseq.Queue, leaseq.Queue]:
    emails = leaseq.Queue("emails", redis=client, max_attempts=3)
    emails.enqueue_many(
        [{"to": f"user{i}@example.org", "template": "welcome"} for i in range(130)],
        ids=[f"mail-{i:04d}" for i in range(130)],
    )
    for lease in emails.claim_many(4, ttl=600.0, worker="web-1:4242:a1b2c3"):
        emails.fail(lease, f"SMTPError: 550 mailbox {lease.payload['to']} unavailable", dead=True)
    held = emails.claim_many(2, ttl=300.0, worker="web-2:777:d4e5f6")
    emails.complete(held[0], result={"sent": True, "ms": 41})
    reports = leaseq.Queue("reports", redis=client)
    reports.enqueue_many([{"report": n} for n in ("daily", "weekly")], delay=3600)
    reports.enqueue({"report": "adhoc"}, id="adhoc-1")
    reports.pause()
    return emails, reports


def shot(page: Any, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def cell(page: Any, queue: str, state: str) -> str:
    return str(page.locator(f'tr[data-queue="{queue}"] a[data-count="{state}"]').inner_text())


def test_read_only_dashboard_overview_paging_and_job_page(browser: Any, client: Any) -> None:
    emails, _ = seed(client)
    served = Served(client, title="redis://127.0.0.1/0")
    page = browser.new_page(viewport={"width": 1280, "height": 640})
    try:
        page.goto(served.url + "/")
        assert page.locator("h1").inner_text() == "Queues"
        assert cell(page, "emails", "pending") == "124"
        assert cell(page, "emails", "dead") == "4"
        assert cell(page, "emails", "active") == "1"
        assert cell(page, "reports", "scheduled") == "2"
        assert page.locator('tr[data-queue="reports"] .badge.paused').is_visible()
        assert page.locator('tr[data-queue="emails"] .badge.paused').count() == 0
        assert "read-only" in page.locator(".mode").inner_text()

        # Counts refresh by themselves, without a reload.
        marker = page.evaluate("() => (window.__marker = 1)")
        emails.enqueue_many([{"to": "late@example.org"}] * 6)
        page.wait_for_function(
            "() => document.querySelector('tr[data-queue=emails] a[data-count=pending]')"
            ".textContent.trim() === '130'",
            timeout=10_000,
        )
        assert page.evaluate("() => window.__marker") == marker

        # The queue page: a tab per state, paged through the index.
        page.click('tr[data-queue="emails"] td.name a')
        assert page.locator("nav.tabs a.current").inner_text().startswith("pending")
        assert page.locator(".pager .range").inner_text() == "1\u201350 of 130"
        first_page = page.locator("td.id a").all_inner_texts()
        assert first_page[0] == "mail-0006" and len(first_page) == 50
        page.click('.pager a[rel="next"]')
        assert page.locator(".pager .range").inner_text() == "51\u2013100 of 130"
        assert page.locator("td.id a").first.inner_text() == "mail-0056"
        page.click('.pager a[rel="last"]')
        assert page.locator(".pager .range").inner_text() == "101\u2013130 of 130"
        shot(page, "queue-pending-last-page")

        # Dead tab: the error column; no action buttons when read-only.
        page.click("nav.tabs a.st-dead")
        assert page.locator("td.err").first.inner_text().startswith("SMTPError: 550")
        assert page.locator("button[data-action]").count() == 0
        shot(page, "queue-dead-read-only")

        # A job page shows every field, times readable and as stored.
        page.click("td.id a >> nth=0")
        assert page.locator("h1").inner_text() == "mail-0000"
        assert page.locator(".qhead .badge.st-dead").inner_text() == "dead"
        assert page.locator(".attempts").inner_text() == "attempt 1 of 3"
        enqueued = page.locator('tr[data-field="enqueued_at"]')
        assert re.fullmatch(r"\d{13}", enqueued.locator("td").nth(0).inner_text())
        assert "ago" in enqueued.locator("td").nth(1).inner_text()
        assert "SMTPError" in page.locator('tr[data-field="last_error"]').inner_text()
        assert '"to": "user0@example.org"' in page.locator("pre[data-payload]").inner_text()
        # ...and its history, read from the queue's event stream.
        moves = page.locator("table[data-history] td.mono").all_inner_texts()
        assert moves[0] == "new → pending" and moves[-1].endswith("→ dead"), moves
        shot(page, "job")

        # A POST to a read-only dashboard is refused, whatever the page sends.
        status = page.evaluate(
            """async () => (await fetch('/queues/emails/actions', {method: 'POST',
                 body: new URLSearchParams({action: 'retry_all'})})).status"""
        )
        assert status == 403
        assert emails.stats().dead == 4
    finally:
        page.close()
        served.stop()
    print(f"screenshots in {SHOTS}")


def test_actions_when_allowed_update_the_list(browser: Any, client: Any) -> None:
    emails, reports = seed(client)
    served = Served(client, allow_actions=True)
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    try:
        page.goto(served.url + "/queues/emails?state=dead")
        assert page.locator("nav.tabs a.current .count").inner_text() == "4"

        # A ticked box holds the live refresh: the list does not change under
        # the operator's hands; once nothing is ticked it catches up by itself.
        page.check('input[name="id"][value="mail-0002"]')
        lease = emails.claim(ttl=60.0)
        assert lease is not None
        emails.fail(lease, "late failure", dead=True)
        page.wait_for_function("() => (+document.body.dataset.liveHeld || 0) >= 2", timeout=10_000)
        assert page.locator("tr[data-job]").count() == 4
        assert page.is_checked('input[name="id"][value="mail-0002"]')
        page.uncheck('input[name="id"][value="mail-0002"]')
        page.evaluate("() => document.activeElement.blur()")  # focus off the box too
        page.wait_for_function("() => document.querySelectorAll('tr[data-job]').length === 5")
        assert page.locator("nav.tabs a.current .count").inner_text() == "5"
        emails.retry_dead(lease.id)

        # Retry one selected dead job: no question for a single retry.
        page.check('input[name="id"][value="mail-0001"]')
        page.click('.bulk button[data-action="retry"]')
        assert "retried 1 of 1 job" in page.locator(".flash").inner_text()
        assert page.locator("nav.tabs a.current .count").inner_text() == "3"
        assert page.locator('tr[data-job="mail-0001"]').count() == 0
        assert emails.get("mail-0001").state == "pending"  # type: ignore[union-attr]

        # Retry all asks first, saying how many; "no" changes nothing.
        page.click('.tools button[data-action="retry_all"]')
        assert page.locator("#question").inner_text() == (
            "Retry all 3 dead jobs of emails? They become pending again."
        )
        shot(page, "confirm-retry-all")
        page.click("text=No, go back")
        assert emails.stats().dead == 3
        page.click('.tools button[data-action="retry_all"]')
        page.click("button[data-confirm]")
        assert "retried 3 dead jobs of emails" in page.locator(".flash").inner_text()
        assert page.locator("nav.tabs a.current .count").inner_text() == "0"
        assert emails.stats().dead == 0

        # Delete a pending job: asked first, then gone from the list.
        page.goto(served.url + "/queues/emails?state=pending")
        page.check('input[name="id"][value="mail-0007"]')
        page.click('.bulk button[data-action="delete"]')
        assert "Delete 1 job of emails (mail-0007)?" in page.locator("#question").inner_text()
        page.click("button[data-confirm]")
        assert "deleted 1 of 1 job" in page.locator(".flash").inner_text()
        assert page.locator('tr[data-job="mail-0007"]').count() == 0
        assert emails.get("mail-0007") is None

        # Pause and resume from the queue page.
        page.click('.tools button[data-action="pause"]')
        page.locator("#qstatus .badge.paused").wait_for(state="visible", timeout=10_000)
        assert emails.stats().paused and emails.claim(ttl=1.0) is None
        shot(page, "queue-paused-actions")
        page.click('.tools button[data-action="resume"]')
        # The badge is redrawn by the reply's script: wait for it, as a person would.
        page.locator("#qstatus .badge.running").wait_for(state="visible", timeout=10_000)
        assert not emails.stats().paused

        # Purge a state: the question names the count; the list empties.
        page.goto(served.url + "/queues/reports?state=scheduled")
        page.click('.tools button[data-action="purge"]')
        assert page.locator("#question").inner_text() == (
            "Delete all 2 scheduled jobs of reports? This cannot be undone."
        )
        page.click("button[data-confirm]")
        assert page.locator("nav.tabs a.current .count").inner_text() == "0"
        assert reports.stats().scheduled == 0
    finally:
        page.close()
        served.stop()


def test_overview_draws_history_charts_and_lists_workers(browser: Any, client: Any) -> None:
    emails, _ = seed(client)
    emails.register_worker("web-1:4242:a1b2c3", ttl=60.0, concurrency=8, done=5, running=1)
    served = Served(client, title="redis://127.0.0.1/0")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(served.url + "/")
        for chart in ("chart-hour", "chart-day"):
            svg = page.locator(f"svg#{chart}")
            assert svg.is_visible()
            assert svg.locator("polyline").count() == 4
            # Measured in one step: the live refresh may swap the element meanwhile.
            w, h = page.evaluate(
                f"() => {{ const b = document.querySelector('svg#{chart}')"
                ".getBoundingClientRect(); return [b.width, b.height]; }"
            )
            assert w > 200 and h > 60
        # 133 enqueued (130 emails, 3 reports) and 4 dead-lettered in the seed, this hour.
        hour = page.locator('svg#chart-hour polyline[data-series="enqueued"]')
        assert hour.get_attribute("data-total") == "133"
        # Each series in its own panel with a round scale; a tooltip per bucket.
        assert hour.get_attribute("data-peak") == "200"
        dead = page.locator('svg#chart-hour polyline[data-series="dead"]')
        assert dead.get_attribute("data-peak") == "5"
        tips = page.evaluate(
            "() => Array.from(document.querySelectorAll('svg#chart-hour rect.bucket title'))"
            ".map(t => t.textContent)"
        )
        # The seed's minute is the last bucket, or the one before when the page
        # was drawn just after a minute turned.
        seeded = [t for t in tips[-2:] if "enqueued 133" in t]
        assert len(tips) >= 60 and seeded and "UTC" in seeded[0], tips[-2:]
        assert "+4 in the last hour" in page.locator(".dead-growth").inner_text()
        assert "1 worker online" in page.locator(".workers-online").inner_text()
        shot(page, "overview-history")
        # The chart follows the live refresh: more dead letters, no reload.
        for lease in emails.claim_many(2, ttl=60.0):
            emails.fail(lease, "boom", dead=True)
        page.wait_for_function(
            "() => document.querySelector('.dead-growth').textContent.includes('+6 in the last')",
            timeout=10_000,
        )
        page.click(".workers-online a")
        assert page.locator("h1").inner_text() == "Workers"
        row = page.locator('tr[data-worker="web-1:4242:a1b2c3"]')
        assert row.is_visible() and "emails" in row.inner_text()
        shot(page, "workers")
    finally:
        page.close()
        served.stop()


SIZES = {"desktop": (1280, 900), "phone": (390, 844)}
"""The two viewports every page is looked at in: a laptop and a phone."""


def seed_everything(client: Any) -> dict[str, str]:
    """Queues that give every page something to show; the paths to visit."""
    emails, _ = seed(client)
    dead = leaseq.Queue("shop", redis=client, backoff=0.0)
    bounce = dead.enqueue({"to": "gone0@bounce.test"}, id="order-0001", max_attempts=2)
    leaseq.Worker(dead, handlers.smtp_bounce, handle_signals=False).run(burst=True)
    dead.schedule("nightly-report", {"n": 1}, cron="0 3 * * *", tz="Europe/Berlin", kind="report")
    thumbs = leaseq.Queue("thumbs", redis=client)
    thumbs.set_limits(concurrency=8, group_concurrency=1, cost_rate=90000, cost_per=60.0)
    thumbs.enqueue_many([{"n": n} for n in range(6)], kind="resize", group="tenant-7", cost=4000)
    thumbs.enqueue_many([{"n": n} for n in range(2)], kind="resize", group="tenant-9")
    running = thumbs.claim_many(2, ttl=600.0, worker="img-1:99:c0ffee")
    for lease, done in zip(running, (0.4, 0.85), strict=True):
        thumbs.progress(lease, done)
    thumbs.register_worker("img-1:99:c0ffee", ttl=600.0, concurrency=4, running=2, done=17)
    emails.register_worker("web-1:4242:a1b2c3", ttl=600.0, concurrency=8, done=5, running=1)
    return {
        "overview": "/",
        "queue-dead": "/queues/shop?state=dead",
        "queue-active": "/queues/thumbs?state=active",
        "job-dead": f"/queues/shop/jobs/{bounce}",
        "workers": "/workers",
        "schedules": "/schedules",
        "limits": "/limits?queue=thumbs",
        "events": "/events?queue=shop",
        "server": "/server",
        "search": "/search?q=bounce",
        "queue-filtered": "/queues/emails?state=dead&kind=&text=mailbox&newer=1h",
    }


@pytest.mark.slow
def test_every_page_at_desktop_and_phone_size_passes_axe(browser: Any, client: Any) -> None:
    from axe_playwright_python.sync_playwright import Axe

    pages = seed_everything(client)
    served = Served(client, title="redis://127.0.0.1/0", allow_actions=True)
    axe = Axe()
    problems: list[str] = []
    try:
        for size, (width, height) in SIZES.items():
            page = browser.new_page(viewport={"width": width, "height": height})
            try:
                for name, path in pages.items():
                    page.goto(served.url + path)
                    page.wait_for_load_state("load")
                    assert page.locator("nav.main a").count() == 6, name
                    png = shot(page, f"{name}-{size}")
                    update = os.environ.get("LEASEQ_UPDATE_SCREENSHOT")
                    if update and size == "desktop" and name in README_SHOTS:
                        shutil.copy(png, ROOT / "docs" / "img" / README_SHOTS[name])
                    found = axe.run(page).response["violations"]
                    problems += [
                        f"{name} at {size}: {v['id']} ({v['impact']}): {v['help']} "
                        f"at {[n['target'] for n in v['nodes']][:3]}"
                        for v in found
                        if v["impact"] in ("serious", "critical")
                    ]
                    # Nothing wider than the screen but what scrolls in its own box.
                    wide = page.evaluate("() => document.documentElement.scrollWidth")
                    assert wide <= width + 1, f"{name} at {size} is {wide} px wide"
            finally:
                page.close()
        assert not problems, "\n".join(problems)

        # Every action is reachable by keyboard: Tab to the navigation and along it.
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            page.goto(served.url + "/")
            for _ in range(6):
                page.keyboard.press("Tab")
                if page.evaluate("() => document.activeElement.textContent") == "Workers":
                    break
            page.keyboard.press("Enter")
            page.wait_for_url("**/workers")
            assert page.locator("h1").inner_text() == "Workers"
            page.goto(served.url + "/queues/shop?state=dead")
            for _ in range(40):  # tab to the bulk checkbox of the dead job, tick it, retry it
                page.keyboard.press("Tab")
                if page.evaluate("() => document.activeElement.value") == "order-0001":
                    break
            page.keyboard.press("Space")
            assert page.is_checked('input[name="id"][value="order-0001"]')
            page.keyboard.press("Shift+Tab")  # back onto the bulk buttons, before the table
            while page.evaluate("() => document.activeElement.dataset.action") != "retry":
                page.keyboard.press("Shift+Tab")
            page.keyboard.press("Enter")
            page.wait_for_selector(".flash")
            assert "retried 1 of 1 job" in page.locator(".flash").inner_text()
        finally:
            page.close()
    finally:
        served.stop()
    print(f"screenshots in {SHOTS}")


README_SHOTS = {
    "overview": "overview.png",
    "job-dead": "dead-job.png",
    "workers": "workers.png",
}
"""The desktop screenshots the README shows (replaced with LEASEQ_UPDATE_SCREENSHOT=1)."""


@pytest.mark.slow
def test_live_updates_arrive_by_push_from_the_event_stream(browser: Any, client: Any) -> None:
    # Readers of the dashboards of earlier tests end once their pages are gone;
    # wait for that, so the count below is this dashboard's alone.
    wait_until(
        lambda: not [t for t in threading.enumerate() if t.name == "leaseq-live"],
        30,
        what="earlier dashboards' live readers to stop",
    )
    emails, _ = seed(client)
    served = Served(client, refresh=60.0)  # a poll would take a minute: only a push is quick
    pages = [browser.new_page(viewport={"width": 1280, "height": 720}) for _ in range(3)]
    try:
        for page in pages:
            page.goto(served.url + "/queues/emails?state=pending")
            page.wait_for_function("() => document.body.dataset.live === 'push'", timeout=10_000)
        page = pages[0]
        marker = page.evaluate("() => (window.__marker = 7)")
        lease = emails.claim(ttl=60.0)  # a job changes state: pending -> active
        assert lease is not None
        page.wait_for_function(
            "() => document.querySelector('nav.tabs a.st-active .count')"
            ".textContent.trim() === '2'",
            timeout=10_000,
        )
        assert page.evaluate("() => window.__marker") == marker  # no reload
        assert page.locator(f'tr[data-job="{lease.id}"]').count() == 0
        # Three tabs, one blocking reader in the dashboard process.
        live = [t for t in threading.enumerate() if t.name == "leaseq-live"]
        assert len(live) == 1
        # The events page follows the stream the same way.
        page.goto(served.url + "/events?queue=emails")
        page.wait_for_function("() => document.body.dataset.live === 'push'", timeout=10_000)
        emails.complete(lease)
        page.wait_for_function(
            "() => document.querySelector('table[data-events] td.mono')"
            ".textContent.includes('succeeded')",
            timeout=10_000,
        )
        # A queue whose events are off: the page polls instead.
        emails.set_events(False)
        page.goto(served.url + "/queues/emails")
        page.wait_for_function("() => document.body.dataset.live === 'poll'", timeout=10_000)
    finally:
        for page in pages:
            page.close()
        served.stop()


def test_a_sleeping_job_shows_in_its_state_tab_with_its_steps(browser: Any, client: Any) -> None:
    # The suspended state (current_job().sleep, wait_for) as a person sees it: its
    # count on the overview, its tab with when each wakes and what it waits for,
    # and a job's page with its step timeline.
    orders = leaseq.Queue("orders", redis=client)
    orders.enqueue({"order": 7}, id="order-7")
    orders.enqueue({"order": 8}, id="order-8")
    lease = orders.claim(ttl=60.0, worker="web-3:99:abc123")
    assert lease is not None
    orders.record_step(lease, "charge", {"charge_id": "ch_7", "cents": 1299})
    orders.suspend(lease, "refund-window", 86_400)
    other = orders.claim(ttl=60.0)
    assert other is not None
    orders.record_step(other, "charge", {"charge_id": "ch_8", "cents": 500})
    orders.suspend(other, "approval", None, "approved:8")
    served = Served(client, title="redis://127.0.0.1/0", allow_actions=True)
    page = browser.new_page(viewport={"width": 1280, "height": 640})
    try:
        page.goto(served.url + "/")
        assert cell(page, "orders", "suspended") == "2"
        page.goto(served.url + "/queues/orders?state=suspended")
        row7 = page.locator("tr[data-job='order-7']").inner_text()
        row8 = page.locator("tr[data-job='order-8']").inner_text()
        assert "in 24 h" in row7 or "in 23 h" in row7, row7
        assert "a time (sleep)" in row7, row7
        assert "on its signal" in row8 and "signal approved:8" in row8, row8
        assert page.locator("button[data-action='run_now']").is_visible()
        shot(page, "suspended-tab")
        page.goto(served.url + "/queues/orders/jobs/order-8")
        steps = page.locator("[data-steps] li").all_inner_texts()
        assert len(steps) == 2, steps
        assert steps[0].startswith("charge done") and "ch_8" in steps[0], steps
        assert steps[1].startswith("approval waiting") and "signal approved:8" in steps[1], steps
        shot(page, "suspended-job")
        page.goto(served.url + "/queues/orders/jobs/order-7")
        steps = page.locator("[data-steps] li").all_inner_texts()
        assert [s.split()[0] for s in steps] == ["charge", "refund-window", "asleep"], steps
    finally:
        page.close()
        served.stop()


def test_schedules_page_shows_the_kind_and_run_now_at_1280(browser: Any, client: Any) -> None:
    # Schedules with long parts (a queue name, a time zone, a payload) at a
    # laptop's width: each row's kind is shown and its one action can be
    # clicked without scrolling sideways.
    shop = leaseq.Queue("shop", redis=client)
    shop.schedule(
        "nightly-report",
        {"customer": "acme-corporation-international", "format": "pdf", "lang": "en"},
        cron="0 3 * * *",
        tz="America/Argentina/Buenos_Aires",
        kind="build_report",
    )
    shop.schedule("digest", {"to": "ops@example.com", "items": list(range(30))}, every=3600)
    billing = leaseq.Queue("billing-eu-west-1", redis=client)
    billing.schedule("sweep-expired-invoices", {"n": 1}, every=300, kind="billing.sweep_expired")
    served = Served(client, title="redis://127.0.0.1/0", allow_actions=True)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto(served.url + "/schedules")
        kinds = {
            row.get_attribute("data-schedule"): row.locator("td.kind").inner_text()
            for row in page.locator("tr[data-schedule]").all()
        }
        assert kinds == {
            "billing-eu-west-1/sweep-expired-invoices": "billing.sweep_expired",
            "shop/digest": "",
            "shop/nightly-report": "build_report",
        }
        shot(page, "schedules-1280")
        buttons = page.locator("tr[data-schedule] button[data-action='fire']")
        assert buttons.count() == 3
        for i in range(3):
            # On screen, and the element a click there reaches (not clipped by
            # the table's scroll box, nor under another cell).
            hit = buttons.nth(i).evaluate(
                """b => { const r = b.getBoundingClientRect();
                          const x = r.left + r.width / 2, y = r.top + r.height / 2;
                          return [r.right <= innerWidth && r.left >= 0,
                                  b.contains(document.elementFromPoint(x, y))]; }"""
            )
            assert hit == [True, True], i
        page.locator("tr[data-schedule='shop/nightly-report'] button[data-action='fire']").click()
        assert "nightly-report" in page.locator(".flash").inner_text()
        assert shop.stats().pending == 1
    finally:
        page.close()
        served.stop()


def seed_invoices(client: Any) -> leaseq.Queue:
    """A shop's 240 dead jobs: 60 invoices (30 timed out), 180 e-mails."""
    shop = leaseq.Queue("shop", redis=client, max_attempts=1)
    for n in range(240):
        kind = "invoice" if n % 4 == 0 else "email"
        payload = {"order": f"ord-{n:04d}", "customer": f"customer-{n % 17}@example.org"}
        shop.enqueue(payload, id=f"{kind}-{n:04d}", kind=kind)
    for lease in shop.claim_many(240, ttl=60.0, worker="shop-1:42:abc"):
        timed_out = int(lease.payload["order"][4:]) % 8 == 0  # half the invoices
        why = (
            "TimeoutError: the payment gateway did not answer"
            if timed_out
            else "SMTPError: 550 mailbox unavailable"
        )
        shop.fail(lease, why, dead=True)
    return shop


def test_filter_dead_jobs_and_act_on_every_match(
    browser: Any, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from leaseq.web import bulk

    shop = seed_invoices(client)
    invoices_timed_out = {
        j.id
        for j in shop.ls("dead", limit=300)
        if j.kind == "invoice" and "Timeout" in (j.last_error or "")
    }
    served = Served(client, title="redis://127.0.0.1/0", allow_actions=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(served.url + "/queues/shop?state=dead")
        assert page.locator("nav.tabs a.current .count").inner_text() == "240"
        # By keyboard, as a person fills a search form: the kind, Tab, the text, Enter.
        page.locator("form.jobfilter input[name=kind]").focus()
        page.keyboard.type("invoice")
        page.keyboard.press("Tab")
        page.keyboard.type("timeout")
        page.keyboard.press("Enter")
        page.wait_for_url("**kind=invoice**")
        assert "text=timeout" in page.url  # the filter is in the URL: it can be shared
        shown = page.locator("tr[data-job]").evaluate_all("rs => rs.map(r => r.dataset.job)")
        assert set(shown) == invoices_timed_out and len(shown) == 30
        line = page.locator("[data-matches]").inner_text()
        assert line.startswith('Dead jobs (kind "invoice", text "timeout"): matches 1\u201330')
        assert "looked at 240 of 240" in line
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 1281
        shot(page, "queue-filtered-1280")

        # Retry every match: asked first, with the count; then done.
        page.click('button[data-scope="matches"][data-action="retry"]')
        assert page.locator("#question").inner_text() == (
            'Retry the 30 dead jobs of shop (kind "invoice", text "timeout")? '
            "They become pending again."
        )
        shot(page, "confirm-retry-matches")
        page.click("button[data-confirm]")
        assert 'retried 30 dead jobs of shop (kind "invoice", text "timeout")' in (
            page.locator(".flash").inner_text()
        )
        assert "kind=invoice" in page.url and page.locator("tr[data-job]").count() == 0
        assert shop.stats().dead == 210 and shop.stats().pending == 30
        shot(page, "queue-filtered-after-retry")

        # Delete every e-mail: one chunk of work per request, so the run goes on
        # through progress pages that submit themselves.
        monkeypatch.setattr(bulk, "RUN_SECONDS", 0.0)
        page.goto(served.url + "/queues/shop?state=dead&kind=email")
        page.click('button[data-scope="matches"][data-action="delete"]')
        assert "Delete the 180 dead jobs of shop" in page.locator("#question").inner_text()
        page.click("button[data-confirm]")
        page.wait_for_selector("form[data-continue]", timeout=10_000)
        shot(page, "bulk-progress")
        page.wait_for_selector(".flash", timeout=30_000)
        assert "deleted 180 dead jobs of shop" in page.locator(".flash").inner_text()
        assert shop.stats().dead == 30
    finally:
        page.close()
        served.stop()

    # On a phone the filter wraps and the list scrolls sideways in its own box.
    phone = browser.new_page(viewport={"width": 390, "height": 844})
    served = Served(client, title="redis://127.0.0.1/0", allow_actions=True)
    try:
        phone.goto(served.url + "/queues/shop?state=dead&kind=invoice&newer=1h")
        assert phone.locator("tr[data-job]").count() == 30
        assert phone.evaluate("() => document.documentElement.scrollWidth") <= 391
        box = phone.locator(".scroll").first
        assert box.evaluate("b => b.scrollWidth > b.clientWidth")
        shot(phone, "queue-filtered-phone")
    finally:
        phone.close()
        served.stop()
    print(f"screenshots in {SHOTS}")

//! The dashboard in a real browser: chromedriver drives headless Chromium
//! against a coordinator with two workers, through the pages an operator
//! uses: filter jobs to RUNNING, find one by id prefix, open it, retry a
//! failed job, bulk-retry the failed set, and see the coordinator become
//! unreachable. Screenshots go to `target/dashboard-*.png`.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs
//! them); without them the test says which packages to install and skips,
//! except under `TASKYARD_REQUIRE_EXTERNAL=1` (set by `.ci/run`), where it
//! fails.

mod common;

use common::browser::{self, attributes, click, eventually, run, screenshot, texts, Chromedriver};
use common::http::Http;
use common::Cluster;
use fantoccini::key::Key;
use fantoccini::{Client, Locator};
use serde_json::{json, Value};

/// Characters of an id that identify it: past the UUID v7 timestamp.
const PREFIX: usize = 28;

fn submit(http: &Http, body: Value) -> String {
    http.submit(&body)
}

fn job(http: &Http, id: &str) -> Value {
    http.get(&format!("/api/jobs/{id}")).json()
}

fn attempts_of(http: &Http, id: &str) -> usize {
    job(http, id)["history"].as_array().map_or(0, Vec::len)
}

/// Waits (over the API) until job `id` is in `state` with `attempts` attempts.
fn wait_for(http: &Http, id: &str, state: &str, attempts: usize) {
    common::wait_until(
        &format!("job {id} {state} after {attempts} attempts"),
        browser::WAIT,
        || {
            let j = job(http, id);
            j["state"] == state && j["history"].as_array().map_or(0, Vec::len) == attempts
        },
    );
}

/// Presses `keys` as the user would, on whatever has the focus.
async fn press(page: &Client, keys: &str) {
    let focused = page.active_element().await.expect("a focused element");
    focused.send_keys(keys).await.expect("keys");
}

/// Keys of the rows the table `table` shows now.
async fn row_keys(page: &Client, table: &str) -> Vec<String> {
    attributes(page, &format!("#{table} tbody tr[data-key]"), "data-key").await
}

async fn confirm(page: &Client) {
    eventually("the confirmation dialog", || async {
        (run(page, "return document.querySelector('#confirm').open;").await == json!(true))
            .then_some(())
    })
    .await;
    click(page, "#confirm-yes").await;
}

#[tokio::test]
async fn an_operator_finds_inspects_and_retries_jobs_and_sees_the_coordinator_stop() {
    let Some(programs) = browser::programs() else {
        return;
    };
    let driver = Chromedriver::start(&programs);
    let profile = tempfile::tempdir().expect("profile dir");
    let mut cluster = Cluster::start(2, 2);
    let http = cluster.http();
    let long = submit(
        &http,
        json!({ "task_type": "sleep", "payload": { "millis": 60000 } }),
    );
    for i in 0..3 {
        submit(
            &http,
            json!({ "task_type": "echo", "payload": { "message": format!("hello {i}") } }),
        );
    }
    let failed: Vec<String> = (0..3)
        .map(|i| {
            let body = json!({ "task_type": "fail", "payload": { "message": format!("boom {i}") }, "max_attempts": 1 });
            submit(&http, body)
        })
        .collect();
    for id in &failed {
        wait_for(&http, id, "FAILED", 1);
    }
    wait_for(&http, &long, "RUNNING", 1);

    let page = driver.browser(profile.path()).await;
    let base = format!("http://{}/", http.addr);
    page.goto(&base).await.expect("open dashboard");
    overview_is_live(&page).await;
    jobs_filtered_to_running(&page, &long).await;
    selection_survives_refreshes(&page, &long).await;
    sorted_oldest_first(&page, &long).await;
    let target = &failed[1];
    find_by_prefix_and_retry(&page, &http, target).await;
    bulk_retry_failed(&page, &http, &failed).await;
    workers_and_queues(&page, &http, &long).await;
    schedules_paused_and_run_now(&page, &cluster).await;
    cancel_by_prefix_link(&page, &http, &base, &long).await;
    readable_on_a_phone(&page).await;

    page.set_window_size(1280, 800).await.expect("window size");
    page.goto(&format!("{base}#/overview"))
        .await
        .expect("overview");
    eventually("overview live again", || async {
        (attributes(&page, "body", "data-conn").await == ["live"]).then_some(())
    })
    .await;
    cluster.stop();
    unreachable_once_stopped(&page).await;
    page.close().await.expect("close the browser");
}

async fn overview_is_live(page: &Client) {
    eventually("overview counts with the three failed jobs", || async {
        let failed = texts(page, "#counts [data-state=FAILED] b").await;
        let live = texts(page, "#live").await;
        (failed == ["3"] && live.iter().any(|t| t.starts_with("live"))).then_some(())
    })
    .await;
    eventually("a line in the jobs-finished chart", || async {
        let lines = attributes(page, "#chart-throughput [data-series]", "data-series").await;
        lines.iter().any(|s| s == "fail").then_some(())
    })
    .await;
    screenshot(page, "dashboard-overview").await;
}

async fn jobs_filtered_to_running(page: &Client, long: &str) {
    press(page, "2").await;
    let state = page
        .find(Locator::Id("filter-state"))
        .await
        .expect("state filter");
    state
        .select_by_value("RUNNING")
        .await
        .expect("choose RUNNING");
    eventually("only the running job listed", || async {
        let states = attributes(page, "#jobs tbody tr[data-key]", "data-state").await;
        (states == ["RUNNING"] && row_keys(page, "jobs").await == [long]).then_some(())
    })
    .await;
    let url = page.current_url().await.expect("url");
    assert!(
        url.as_str().contains("state=RUNNING"),
        "the filter is in the URL: {url}"
    );
    let ids = texts(page, "#jobs tbody code.job-id").await;
    assert_eq!(ids, [long], "the whole id is shown, not a prefix");
    // Times are in the browser's zone, named in the header, UTC on hover.
    let zone = texts(page, "#zone").await;
    assert!(
        zone.len() == 1 && zone[0].starts_with("times in "),
        "{zone:?}"
    );
    let titles = attributes(page, "#jobs tbody time", "title").await;
    assert!(
        !titles.is_empty() && titles.iter().all(|t| t.ends_with("Z (UTC)")),
        "{titles:?}"
    );
}

/// A refresh patches rows: the row element stays and a selection in it too.
async fn selection_survives_refreshes(page: &Client, long: &str) {
    run(
        page,
        "const code = document.querySelector('#jobs tbody code.job-id');
         getSelection().selectAllChildren(code);
         window.keptRow = code.closest('tr');
         return true;",
    )
    .await;
    for _ in 0..2 {
        let before = texts(page, "#live").await;
        eventually("a refresh", || async {
            (texts(page, "#live").await != before).then_some(())
        })
        .await;
    }
    let kept = run(
        page,
        "return [getSelection().toString(), document.querySelector('#jobs tbody tr') === window.keptRow];",
    )
    .await;
    assert_eq!(
        kept,
        json!([long, true]),
        "selection and row survive refreshes"
    );
    run(page, "getSelection().removeAllRanges(); return true;").await;
}

/// The submitted column sorts on the server: oldest first puts the first
/// job submitted at the top, and the order is in the URL.
async fn sorted_oldest_first(page: &Client, first: &str) {
    click(page, "#filter-clear").await;
    eventually("every job listed", || async {
        (row_keys(page, "jobs").await.len() >= 7).then_some(())
    })
    .await;
    click(page, "#sort-submitted").await;
    eventually("the first job submitted at the top", || async {
        let keys = row_keys(page, "jobs").await;
        (keys.first().map(String::as_str) == Some(first)).then_some(())
    })
    .await;
    let url = page.current_url().await.expect("url");
    assert!(url.as_str().contains("order=oldest"), "{url}");
    click(page, "#sort-submitted").await;
    eventually("newest first again", || async {
        let keys = row_keys(page, "jobs").await;
        (keys.last().map(String::as_str) == Some(first)).then_some(())
    })
    .await;
}

async fn find_by_prefix_and_retry(page: &Client, http: &Http, target: &str) {
    click(page, "#filter-clear").await;
    let search = page
        .find(Locator::Id("filter-q"))
        .await
        .expect("search box");
    search.click().await.expect("focus search");
    search
        .send_keys(&(target[..PREFIX].to_string() + &Key::Enter))
        .await
        .expect("type a prefix");
    eventually("the one job with that prefix", || async {
        (row_keys(page, "jobs").await == [target]).then_some(())
    })
    .await;
    // Keyboard: Esc leaves the search box, j focuses the first row, Enter opens it.
    press(page, &Key::Escape).await;
    press(page, "j").await;
    press(page, &Key::Enter).await;
    eventually("the failed job's detail", || async {
        let id = texts(page, "#detail-id").await;
        let state = texts(page, "#detail-state").await;
        let error = texts(page, "#detail-error").await;
        let attempts = texts(page, "#history tbody tr[data-key]").await;
        (id == [target] && state == ["FAILED"] && error == ["boom 1"] && attempts.len() == 1)
            .then_some(())
    })
    .await;
    let in_view = run(
        page,
        "const r = document.querySelector('#detail').getBoundingClientRect();
         return r.top >= 0 && r.top < innerHeight / 4 && r.left < innerWidth && r.width >= 300;",
    )
    .await;
    assert_eq!(in_view, json!(true), "the detail opens in view");
    screenshot(page, "dashboard-detail").await;

    click(page, "#retry-button").await;
    wait_for(http, target, "FAILED", 2);
    eventually("the detail to show the second attempt", || async {
        (texts(page, "#history tbody tr[data-key]").await.len() == 2).then_some(())
    })
    .await;
    press(page, &Key::Escape).await;
    eventually("the detail to close", || async {
        (attributes(page, "#detail[hidden]", "id").await.len() == 1).then_some(())
    })
    .await;
}

async fn bulk_retry_failed(page: &Client, http: &Http, failed: &[String]) {
    click(page, "#tabs a[data-page=failed]").await;
    eventually("the three failed jobs", || async {
        let mut keys = row_keys(page, "failed").await;
        keys.sort();
        let mut want = failed.to_vec();
        want.sort();
        (keys == want).then_some(())
    })
    .await;
    let before: Vec<usize> = failed.iter().map(|id| attempts_of(http, id)).collect();
    click(page, "#failed-retry-all").await;
    screenshot(page, "dashboard-failed-confirm").await;
    confirm(page).await;
    for (id, n) in failed.iter().zip(&before) {
        wait_for(http, id, "FAILED", n + 1);
    }
    eventually("the bulk retry reported", || async {
        texts(page, "#failed-message")
            .await
            .iter()
            .any(|t| t.starts_with("3 requeued"))
            .then_some(())
    })
    .await;

    // Only the selected job is retried by "Retry selected".
    let chosen = &failed[0];
    click(
        page,
        &format!("#failed tr[data-key='{chosen}'] input[type=checkbox]"),
    )
    .await;
    eventually("one selected", || async {
        (texts(page, "#failed-selection").await == ["1 selected"]).then_some(())
    })
    .await;
    let others: Vec<usize> = failed[1..].iter().map(|id| attempts_of(http, id)).collect();
    click(page, "#failed-retry-selected").await;
    confirm(page).await;
    wait_for(http, chosen, "FAILED", before[0] + 2);
    screenshot(page, "dashboard-failed").await;
    let after: Vec<usize> = failed[1..].iter().map(|id| attempts_of(http, id)).collect();
    assert_eq!(after, others, "jobs not selected were not retried");
}

async fn workers_and_queues(page: &Client, http: &Http, long: &str) {
    click(page, "#tabs a[data-page=workers]").await;
    eventually(
        "the worker running the long job, with a free slot",
        || async {
            let rows = texts(page, "#workers tbody tr[data-key]").await;
            let busy: Vec<&String> = rows.iter().filter(|r| r.contains(long)).collect();
            (rows.len() == 2 && busy.len() == 1 && busy[0].contains("1 / 2")).then_some(())
        },
    )
    .await;
    submit(
        http,
        json!({ "task_type": "nobody-runs-this", "payload": null }),
    );
    click(page, "#tabs a[data-page=queues]").await;
    eventually("the queue no worker runs, flagged", || async {
        let rows = texts(page, "#queues tbody tr[data-type=nobody-runs-this]").await;
        rows.iter()
            .any(|r| r.contains("no worker runs this type"))
            .then_some(())
    })
    .await;
    screenshot(page, "dashboard-queues").await;
}

/// A schedule made with the client library is listed; Pause marks it
/// paused with no next run, and Run now fires its job, shown as its last
/// run; that job's detail names the schedule and links back to its row.
async fn schedules_paused_and_run_now(page: &Client, cluster: &Cluster) {
    let spec = taskyard::protocol::ScheduleSpec {
        cron: Some("0 3 * * *".into()),
        ..taskyard::protocol::ScheduleSpec::new(
            "nightly",
            "echo",
            taskyard::protocol::payloads::encode_json(&json!({ "message": "hi" })),
        )
    };
    cluster
        .client()
        .create_schedule(spec)
        .expect("answered")
        .expect("created");
    click(page, "#tabs a[data-page=schedules]").await;
    let row = "#schedules tbody tr[data-schedule=nightly]";
    eventually("the schedule listed, active, never run", || async {
        let rows = texts(page, row).await;
        rows.iter()
            .any(|r| r.contains("0 3 * * *") && r.contains("active") && r.contains("never"))
            .then_some(())
    })
    .await;
    click(page, &format!("{row} button[data-action=pause]")).await;
    eventually("paused, with no next run", || async {
        let rows = texts(page, row).await;
        rows.iter()
            .any(|r| r.contains("paused") && r.contains("none"))
            .then_some(())
    })
    .await;
    click(page, &format!("{row} button[data-action=trigger]")).await;
    eventually("the triggered job as its last run", || async {
        let rows = texts(page, row).await;
        let message = texts(page, "#schedules-message").await;
        (rows
            .iter()
            .any(|r| r.contains("SUCCEEDED") && r.contains("triggered"))
            && message.iter().any(|m| m.contains("triggered: job")))
        .then_some(())
    })
    .await;
    screenshot(page, "dashboard-schedules").await;
    job_detail_links_to_its_schedule(page, row).await;
}

/// The last run's job opens from the schedule's row; its detail shows the
/// schedule and key, and the schedule's link marks its row.
async fn job_detail_links_to_its_schedule(page: &Client, row: &str) {
    click(page, &format!("{row} a.job-link")).await;
    eventually("the triggered job's detail names its schedule", || async {
        let fields = texts(page, "#detail-fields").await.join("\n");
        (fields.contains("nightly, triggered by hand")
            && fields.contains("schedule:nightly:trigger:"))
        .then_some(())
    })
    .await;
    screenshot(page, "dashboard-detail-schedule").await;
    click(page, "#detail-fields a.schedule-link").await;
    eventually(
        "the Schedules page with the schedule's row marked",
        || async {
            let marked = attributes(page, "#schedules tbody tr.open", "data-schedule").await;
            let closed = attributes(page, "#detail[hidden]", "id").await.len() == 1;
            (marked == ["nightly"] && closed).then_some(())
        },
    )
    .await;
}

/// A link with an id prefix opens the job; cancelling it from there works.
async fn cancel_by_prefix_link(page: &Client, http: &Http, base: &str, long: &str) {
    let link = format!("{base}#/jobs?job={}", &long[..PREFIX]);
    page.goto(&link).await.expect("open by prefix");
    eventually("the running job's detail, full id shown", || async {
        let id = texts(page, "#detail-id").await;
        (id == [long] && texts(page, "#detail-state").await == ["RUNNING"]).then_some(())
    })
    .await;
    click(page, "#cancel-button").await;
    eventually("the detail to show CANCELLED", || async {
        (texts(page, "#detail-state").await == ["CANCELLED"]).then_some(())
    })
    .await;
    let j = job(http, long);
    assert_eq!(j["state"], "CANCELLED");
    assert_eq!(j["history"][0]["outcome"]["kind"], "cancelled");
}

async fn readable_on_a_phone(page: &Client) {
    page.set_window_size(390, 844).await.expect("phone width");
    for view in ["failed", "workers", "jobs"] {
        run(page, &format!("location.hash = '#/{view}'; return true;")).await;
        eventually(&format!("the {view} page"), || async {
            let shown = attributes(
                page,
                &format!("#page-{view}:not([hidden]) tbody tr"),
                "data-key",
            )
            .await;
            (!shown.is_empty()).then_some(())
        })
        .await;
        let overflow = run(
            page,
            "return document.documentElement.scrollWidth - window.innerWidth;",
        )
        .await;
        assert!(
            overflow.as_i64().unwrap_or(1) <= 0,
            "{view} scrolls sideways at phone width: {overflow}"
        );
    }
    screenshot(page, "dashboard-phone").await;
}

async fn unreachable_once_stopped(page: &Client) {
    eventually("the unreachable state", || async {
        let conn = attributes(page, "body", "data-conn").await;
        let banner = texts(page, "#conn-banner").await;
        (conn == ["down"]
            && banner.iter().any(|b| {
                b.contains("Coordinator unreachable") && b.contains("nothing below is live")
            }))
        .then_some(())
    })
    .await;
    let dimmed = run(
        page,
        "return getComputedStyle(document.querySelector('main')).opacity;",
    )
    .await;
    assert_ne!(dimmed, json!("1"), "stale numbers are dimmed");
    screenshot(page, "dashboard-unreachable").await;
}

/// With `client-token` set the page still opens, says it needs the token,
/// and once it is typed shows live data (every request then carries it).
#[tokio::test]
async fn a_coordinator_with_a_token_asks_for_it_and_then_shows_live_data() {
    let Some(programs) = browser::programs() else {
        return;
    };
    let driver = Chromedriver::start(&programs);
    let profile = tempfile::tempdir().expect("profile dir");
    let mut cluster = Cluster::start_configured(|c| c.client_token = "s3cret".into());
    cluster.add_worker("worker-0", 1);
    let addr = cluster.coordinator().http_addr.expect("http on");
    let page = driver.browser(profile.path()).await;
    page.goto(&format!("http://{addr}/#/workers"))
        .await
        .expect("open dashboard");
    eventually("the request for a token", || async {
        let conn = attributes(&page, "body", "data-conn").await;
        let form = attributes(&page, "#token-form:not([hidden])", "id").await;
        (conn == ["auth"] && form.len() == 1).then_some(())
    })
    .await;
    assert!(
        texts(&page, "#workers tbody tr[data-key]").await.is_empty(),
        "nothing shown without the token"
    );
    let input = page
        .find(Locator::Id("token-input"))
        .await
        .expect("token input");
    input
        .send_keys(&("s3cret".to_string() + &Key::Enter))
        .await
        .expect("type the token");
    eventually("live data with the token", || async {
        let conn = attributes(&page, "body", "data-conn").await;
        let workers = row_keys(&page, "workers").await;
        (conn == ["live"] && workers == ["worker-0"]).then_some(())
    })
    .await;
    let banner = attributes(&page, "#conn-banner[hidden]", "id").await;
    assert_eq!(banner.len(), 1, "the banner is gone once the token works");
    page.close().await.expect("close the browser");
}

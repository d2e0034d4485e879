//! The dashboard in a real browser: chromedriver drives headless Chromium
//! against a coordinator with two workers. Needs Debian's `chromium` and
//! `chromium-driver` (`.ci/run` installs them); without them the test says
//! which packages to install and skips, except under
//! `TASKYARD_REQUIRE_EXTERNAL=1` (set by `.ci/run`), where it fails.

mod common;

use common::external::{self, Package::Debian};
use common::http::Http;
use common::Cluster;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use std::future::Future;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);

/// A chromedriver process on a free loopback port; killed on drop.
struct Chromedriver {
    child: Child,
    url: String,
}

impl Chromedriver {
    fn start(binary: &Path) -> Chromedriver {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(binary)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + WAIT;
        while TcpStream::connect(addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on {addr}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Chromedriver {
            child,
            url: format!("http://{addr}"),
        }
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn browser(driver: &Chromedriver, chromium: &Path, profile: &Path) -> Client {
    let args = [
        "--headless".to_string(),
        "--no-sandbox".to_string(),
        "--disable-gpu".to_string(),
        "--disable-dev-shm-usage".to_string(),
        "--disable-background-networking".to_string(),
        "--disable-component-update".to_string(),
        "--disable-sync".to_string(),
        "--no-first-run".to_string(),
        "--window-size=1280,800".to_string(),
        format!("--user-data-dir={}", profile.display()),
    ];
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({ "binary": chromium.display().to_string(), "args": args }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a WebDriver session with headless Chromium")
}

/// Polls `check` until it returns `Some`; panics naming `what` after `WAIT`.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn texts(page: &Client, css: &str) -> Vec<String> {
    let mut out = Vec::new();
    for element in page.find_all(Locator::Css(css)).await.unwrap_or_default() {
        out.push(element.text().await.unwrap_or_default());
    }
    out
}

async fn attribute(page: &Client, css: &str, name: &str) -> Option<String> {
    let element = page.find(Locator::Css(css)).await.ok()?;
    element.attr(name).await.ok().flatten()
}

fn submit_over_api(http: &Http, body: Value) -> String {
    let response = http.post("/api/jobs", &body);
    assert_eq!(response.status, 201, "{response:?}");
    response.json()["job_id"].as_str().expect("id").to_string()
}

#[tokio::test]
async fn dashboard_shows_workers_and_jobs_and_cancels_a_running_job() {
    let Some(chromium) = external::program(&["chromium", "chromium-browser"], Debian("chromium"))
    else {
        return;
    };
    let Some(chromedriver) = external::program(&["chromedriver"], Debian("chromium-driver")) else {
        return;
    };
    let driver = Chromedriver::start(&chromedriver);
    let profile = tempfile::tempdir().expect("profile dir");
    let cluster = Cluster::start(2, 2);
    let http = cluster.http();
    let page = browser(&driver, &chromium, profile.path()).await;
    page.set_window_size(1280, 800).await.expect("window size");
    page.goto(&format!("http://{}/", http.addr))
        .await
        .expect("open dashboard");

    let workers = eventually("both workers in the workers table", || async {
        let rows = texts(&page, "#workers tbody tr[data-worker]").await;
        (rows.len() == 2).then_some(rows)
    })
    .await;
    assert!(
        workers
            .iter()
            .any(|r| r.contains("worker-0") && r.contains("0 / 2")),
        "{workers:?}"
    );

    // The long job through the dashboard's own form; a few quick ones by API.
    let payload = page
        .find(Locator::Id("submit-payload"))
        .await
        .expect("payload input");
    payload.clear().await.expect("clear");
    payload
        .send_keys(r#"{"millis": 60000}"#)
        .await
        .expect("type payload");
    page.find(Locator::Id("submit-button"))
        .await
        .expect("button")
        .click()
        .await
        .expect("submit");
    for i in 0..3 {
        submit_over_api(
            &http,
            json!({ "task_type": "echo", "payload": { "message": format!("hello {i}") } }),
        );
    }
    submit_over_api(
        &http,
        json!({ "task_type": "fail", "payload": { "message": "boom" }, "max_attempts": 1 }),
    );

    eventually(
        "recent jobs to show the finished and the running jobs",
        || async {
            let done = page
                .find_all(Locator::Css("#jobs tr[data-state=SUCCEEDED]"))
                .await
                .ok()?;
            let failed = texts(&page, "#jobs tr[data-state=FAILED]").await;
            let running = page
                .find_all(Locator::Css("#jobs tr[data-state=RUNNING]"))
                .await
                .ok()?;
            (done.len() == 3 && failed.iter().any(|r| r.contains("boom")) && running.len() == 1)
                .then_some(())
        },
    )
    .await;
    eventually("the workers table to show one slot in use", || async {
        let rows = texts(&page, "#workers tbody tr[data-worker]").await;
        rows.iter().any(|r| r.contains("1 / 2")).then_some(())
    })
    .await;

    let running = page
        .find(Locator::Css("#jobs tr[data-state=RUNNING]"))
        .await
        .expect("row");
    let job_id = running
        .attr("data-job")
        .await
        .expect("attr")
        .expect("job id");
    running.click().await.expect("open detail");
    eventually("the detail view of the running job", || async {
        let state = texts(&page, "#detail-state").await;
        let history = texts(&page, "#history tbody tr").await;
        (state == ["RUNNING"] && history.len() == 1).then_some(())
    })
    .await;
    save_screenshot(&page).await;

    page.find(Locator::Id("cancel-button"))
        .await
        .expect("cancel")
        .click()
        .await
        .expect("click");
    eventually("the detail view to show CANCELLED", || async {
        (texts(&page, "#detail-state").await == ["CANCELLED"]).then_some(())
    })
    .await;
    let job = http.get(&format!("/api/jobs/{job_id}")).json();
    assert_eq!(job["state"], "CANCELLED");
    assert_eq!(job["history"][0]["outcome"]["kind"], "cancelled");
    let state = attribute(
        &page,
        &format!("#jobs tr[data-job='{job_id}']"),
        "data-state",
    )
    .await;
    assert_eq!(state.as_deref(), Some("CANCELLED"));

    page.set_window_size(390, 844).await.expect("phone width");
    let overflow = page
        .execute(
            "return document.documentElement.scrollWidth - window.innerWidth;",
            vec![],
        )
        .await
        .expect("measure");
    assert!(
        overflow.as_i64().unwrap_or(1) <= 0,
        "page scrolls sideways at phone width: {overflow}"
    );
    page.close().await.expect("close the browser");
}

/// Writes a screenshot of the whole page at desktop width (the window made
/// tall enough for the job detail) to `target/dashboard.png`.
async fn save_screenshot(page: &Client) {
    page.set_window_size(1280, 1280).await.expect("tall window");
    let png = page.screenshot().await.expect("screenshot");
    page.set_window_size(1280, 800).await.expect("window size");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .join("dashboard.png");
    std::fs::write(&target, png).expect("write target/dashboard.png");
}

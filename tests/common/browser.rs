//! Headless Chromium driven through chromedriver (WebDriver), for tests of
//! the dashboard: finding the programs, a driver process on a free port, a
//! session, polling the page, and screenshots under `target/`.

use super::external::{self, Package::Debian};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use std::future::Future;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long any one condition on the page is waited for.
pub const WAIT: Duration = Duration::from_secs(20);

const CHROMIUM: [&str; 2] = ["chromium", "chromium-browser"];

/// Chromium and chromedriver, found by the external-program policy.
pub struct Programs {
    chromium: PathBuf,
    chromedriver: PathBuf,
}

/// Both programs, or `None` (the test should return) after saying which
/// Debian package provides the missing one; a failure instead under
/// `TASKYARD_REQUIRE_EXTERNAL=1` (see `external`).
pub fn programs() -> Option<Programs> {
    Some(Programs {
        chromium: external::program(&CHROMIUM, Debian("chromium"))?,
        chromedriver: external::program(&["chromedriver"], Debian("chromium-driver"))?,
    })
}

/// A chromedriver process on a free loopback port; killed on drop.
pub struct Chromedriver {
    child: Child,
    url: String,
    chromium: PathBuf,
}

impl Chromedriver {
    pub fn start(programs: &Programs) -> Chromedriver {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(&programs.chromedriver)
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
            chromium: programs.chromium.clone(),
        }
    }

    /// A headless Chromium session with its profile in `profile`, at
    /// 1280×800.
    pub async fn browser(&self, profile: &Path) -> Client {
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
            json!({ "binary": self.chromium.display().to_string(), "args": args }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let page = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&self.url)
            .await
            .expect("a WebDriver session with headless Chromium");
        page.set_window_size(1280, 800).await.expect("window size");
        page
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` until it returns `Some`; panics naming `what` after `WAIT`.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
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

/// The text of every element matching `css` (none: empty).
pub async fn texts(page: &Client, css: &str) -> Vec<String> {
    let mut out = Vec::new();
    for element in page.find_all(Locator::Css(css)).await.unwrap_or_default() {
        out.push(element.text().await.unwrap_or_default());
    }
    out
}

/// `name` of every element matching `css`.
pub async fn attributes(page: &Client, css: &str, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for element in page.find_all(Locator::Css(css)).await.unwrap_or_default() {
        if let Ok(Some(value)) = element.attr(name).await {
            out.push(value);
        }
    }
    out
}

/// Clicks the element matching `css`, panicking with `css` if it is not there.
pub async fn click(page: &Client, css: &str) {
    page.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css} not found: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}

/// Runs `script` (a function body; `return` gives the value) in the page.
pub async fn run(page: &Client, script: &str) -> serde_json::Value {
    page.execute(script, vec![])
        .await
        .unwrap_or_else(|e| panic!("script failed ({e}): {script}"))
}

/// Writes a screenshot of the viewport to `target/NAME.png` and returns
/// its path.
pub async fn screenshot(page: &Client, name: &str) -> PathBuf {
    let png = page.screenshot().await.expect("screenshot");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .join(format!("{name}.png"));
    std::fs::write(&target, png).unwrap_or_else(|e| panic!("write {}: {e}", target.display()));
    target
}

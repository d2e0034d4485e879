//! A program that only submits or runs jobs depends on `taskyard-client`,
//! which must build without the server's dependencies: no actix-web, no
//! SQLite, no PostgreSQL: a team writing a worker does not compile the
//! coordinator. `cargo tree` reads the resolved graph of that crate alone,
//! with the features it asks for itself. (`tests/custom_worker.rs` runs
//! the crate's example, a custom task type, against a coordinator.)

use std::collections::BTreeSet;
use std::process::Command;

/// The packages `taskyard-client` pulls in for a normal build.
fn client_dependencies() -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args([
            "tree",
            "--package",
            "taskyard-client",
            "--edges",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_client_crate_builds_without_the_servers_dependencies() {
    let packages = client_dependencies();
    // The graph was read: the crate and its protocol are in it.
    assert!(packages.contains("taskyard-client"), "{packages:?}");
    assert!(packages.contains("taskyard-protocol"), "{packages:?}");
    for server_only in [
        "actix",
        "actix-web",
        "actix-rt",
        "rusqlite",
        "libsqlite3-sys",
        "postgres",
        "tokio-postgres",
        "croner",
        "prometheus-client",
        "taskyard-server",
        "taskyard-bench",
    ] {
        assert!(
            !packages.contains(server_only),
            "taskyard-client depends on {server_only}: {packages:?}"
        );
    }
}

//! Coordinator nodes in one process sharing a lease (`MemoryLease`) and one
//! SQLite file: roles, NotLeader answers, handover on a clean stop, and
//! step-down when the epoch moves on. The same runtime on PostgreSQL is
//! tested in ha_postgres.rs.

mod common;

use common::http::Http;
use std::sync::Arc;
use std::time::{Duration, Instant};
use taskyard::client::Client;
use taskyard::config::CoordinatorConfig;
use taskyard::ha::MemoryLease;
use taskyard::process::node::{NodeHandle, OpenedStore, StoreOpener};
use taskyard::protocol::CoordinatorToClient;
use taskyard::store::JobStore;

fn node_config(dir: &std::path::Path, name: &str) -> CoordinatorConfig {
    CoordinatorConfig {
        node_name: name.to_string(),
        leader_lease_millis: 1000,
        sqlite_preallocate_wal: false,
        ..common::coordinator_config(dir)
    }
}

fn sqlite(config: &CoordinatorConfig) -> StoreOpener {
    let (path, sync) = (config.db_path.clone(), config.sqlite_synchronous);
    Arc::new(move || {
        Ok(OpenedStore {
            store: Box::new(JobStore::open(&path, sync)?),
            history: None,
        })
    })
}

fn start(dir: &std::path::Path, name: &str, lease: &MemoryLease) -> NodeHandle {
    let config = node_config(dir, name);
    let opener = sqlite(&config);
    NodeHandle::spawn(config, Box::new(lease.clone()), opener, common::quiet_log()).expect("starts")
}

/// Waits until `node` serves (its client listener answers `Hello`).
fn wait_leading(node: &NodeHandle, within: Duration) -> Duration {
    common::raw_client::wait_serving(&node.client_addr.to_string(), within)
}

/// What the node answers a raw `Hello` with: the leader it names in
/// `NotLeader` (the client library would follow it instead of saying).
fn not_leader(node: &NodeHandle) -> Option<String> {
    let mut stream = common::raw_client::connect(&node.client_addr.to_string());
    match common::raw_client::read_frame(&mut stream, Duration::from_secs(5)) {
        Some(CoordinatorToClient::NotLeader { leader }) => leader.map(|l| l.node),
        other => panic!("expected NotLeader, got {other:?}"),
    }
}

#[test]
fn one_node_leads_the_other_sends_peers_to_it_and_takes_over_on_a_clean_stop() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lease = MemoryLease::new();
    let a = start(dir.path(), "node-a", &lease);
    wait_leading(&a, Duration::from_secs(5));
    let b = start(dir.path(), "node-b", &lease);
    // b reads the lease at once: it knows who leads.
    let deadline = Instant::now() + Duration::from_secs(2);
    while not_leader(&b).is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(not_leader(&b).as_deref(), Some("node-a"));

    let http_b = Http::new(b.http_addr.expect("http"));
    assert_eq!(http_b.get("/healthz").status, 200);
    let ready = http_b.get("/readyz");
    assert_eq!(ready.status, 503);
    assert!(
        ready.body.contains("standby: node-a leads"),
        "{}",
        ready.body
    );
    let jobs = http_b.get("/api/jobs");
    assert_eq!(jobs.status, 503);
    assert_eq!(jobs.json()["code"], "not_leader");
    assert_eq!(jobs.json()["leader"]["node"], "node-a");
    let http_a = Http::new(a.http_addr.expect("http"));
    assert_eq!(http_a.get("/readyz").status, 200);

    let stopping = Instant::now();
    a.stop();
    let took = stopping.elapsed() + wait_leading(&b, Duration::from_secs(5));
    println!("clean handover took {took:?} (lease 1000 ms)");
    assert!(took < Duration::from_millis(900), "took {took:?}");
    assert_eq!(
        Http::new(b.http_addr.expect("http")).get("/readyz").status,
        200
    );
    b.stop();
}

#[test]
fn a_leader_whose_epoch_moved_on_steps_down_and_closes_its_sessions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lease = MemoryLease::new();
    let a = start(dir.path(), "node-a", &lease);
    wait_leading(&a, Duration::from_secs(5));
    let mut session = Client::connect(&a.client_addr.to_string()).expect("connects");
    session.ping().expect("serves");
    lease.bump_epoch();
    let deadline = Instant::now() + Duration::from_secs(2);
    while a.view.term().is_some() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(a.view.term().is_none(), "stepped down at its next renewal");
    assert!(session.ping().is_err(), "its sessions are closed");
    // Not taken by anyone else: once the lease expires it leads again, at a
    // new epoch, in the same process.
    wait_leading(&a, Duration::from_secs(5));
    assert!(a.view.term().expect("leads").epoch >= 3);
    assert!(a.view.read().leader_changes >= 3);
    a.stop();
}

#[test]
fn a_leader_stops_serving_when_its_trust_ends_even_while_the_lease_call_hangs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lease = MemoryLease::new();
    let a = start(dir.path(), "node-a", &lease);
    wait_leading(&a, Duration::from_secs(5));
    let mut session = Client::connect(&a.client_addr.to_string()).expect("connects");
    lease.stall(true);
    let stalled = Instant::now();
    let deadline = stalled + Duration::from_secs(2);
    while a.view.term().is_some() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = stalled.elapsed();
    println!("stopped serving {took:?} after the lease stalled (lease 1000 ms, trust 800 ms)");
    assert!(a.view.term().is_none(), "the watchdog ended the term");
    // What matters is that it stopped before the lease could expire on
    // the database (1000 ms), so a standby could not lead beside it.
    assert!(
        took < Duration::from_millis(1000),
        "within the lease: {took:?}"
    );
    assert!(session.ping().is_err(), "its sessions are closed");
    assert!(
        common::raw_client::named_leader(&a.client_addr.to_string()).is_some(),
        "a standby now"
    );
    lease.stall(false);
    wait_leading(&a, Duration::from_secs(5));
    a.stop();
}

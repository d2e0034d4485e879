//! The `LeaseStore` contract, on PostgreSQL (a throwaway cluster) and on
//! the in-memory lease the node tests use: acquire only a free or expired
//! lease with a new epoch, renew only at one's own epoch, release wakes
//! waiters, a restarted process with the same name inherits nothing, and
//! members are listed leader first.

mod common;

use std::time::{Duration, Instant};
use taskyard::ha::{LeaseStore, MemberRole, MemoryLease, NodeIdentity, PostgresLease};
use taskyard::protocol::LeaderAddresses;

const TTL: Duration = Duration::from_millis(600);

fn node(name: &str) -> NodeIdentity {
    NodeIdentity {
        node: name.into(),
        addresses: LeaderAddresses {
            client: Some(format!("{name}:7400")),
            worker: Some(format!("{name}:7401")),
            http: None,
            ..LeaderAddresses::default()
        },
    }
}

/// Runs the contract on two handles of one lease (two processes).
fn contract(
    mut a: Box<dyn LeaseStore>,
    mut b: Box<dyn LeaseStore>,
    mut again: Box<dyn LeaseStore>,
) {
    let (x, y) = (node("x"), node("y"));
    assert_eq!(a.leader().expect("read"), None, "never held");
    assert_eq!(a.try_acquire(&x, TTL).expect("acquire"), Some(1));
    assert_eq!(b.try_acquire(&y, TTL).expect("acquire"), None, "x holds it");
    let record = b.leader().expect("read").expect("held");
    assert_eq!(record.leader.node, "x");
    assert_eq!(record.leader.epoch, 1);
    assert_eq!(record.leader.client.as_deref(), Some("x:7400"));
    assert!(record.expires_in_ms > 0 && record.expires_in_ms <= TTL.as_millis() as i64);
    assert!(a.renew(&x, 1, TTL).expect("renew"), "x at its own epoch");
    assert!(!a.renew(&x, 2, TTL).expect("renew"), "not at another epoch");
    assert!(!b.renew(&y, 1, TTL).expect("renew"), "not another node");

    // A restarted x (same name, a new connection) inherits nothing.
    assert_eq!(again.try_acquire(&x, TTL).expect("acquire"), None);

    // Members, leader first.
    b.check_in(&y, MemberRole::Standby).expect("check in");
    a.check_in(&x, MemberRole::Leader).expect("check in");
    let members = b.members(Duration::from_secs(5)).expect("members");
    let names: Vec<&str> = members.iter().map(|m| m.node.as_str()).collect();
    assert_eq!(names, ["x", "y"]);
    assert_eq!(members[0].role, MemberRole::Leader);
    assert_eq!(members[1].addresses.worker.as_deref(), Some("y:7401"));

    // A release wakes a waiter at once, and y takes the lease at epoch 2.
    let waiter = std::thread::spawn(move || {
        let started = Instant::now();
        b.wait_for_change(Duration::from_secs(5)).expect("wait");
        (b, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(100));
    a.release(&x, 1).expect("release");
    let (mut b, waited) = waiter.join().expect("waiter");
    assert!(
        waited < Duration::from_secs(2),
        "woken by the release: {waited:?}"
    );
    let record = b.leader().expect("read").expect("row");
    assert!(record.leader.node.is_empty(), "released: {record:?}");
    assert_eq!(b.try_acquire(&y, TTL).expect("acquire"), Some(2));

    // Expired: taken over with a new epoch, and the old holder's renewal
    // is refused.
    std::thread::sleep(TTL + Duration::from_millis(100));
    assert!(b.leader().expect("read").expect("row").expires_in_ms <= 0);
    assert_eq!(again.try_acquire(&x, TTL).expect("acquire"), Some(3));
    assert!(!b.renew(&y, 2, TTL).expect("renew"), "y was taken over");
    // Releasing an epoch one no longer holds changes nothing.
    b.release(&y, 2).expect("release");
    assert_eq!(a.leader().expect("read").expect("row").leader.node, "x");
}

#[test]
fn the_memory_lease_meets_the_contract() {
    let lease = MemoryLease::new();
    contract(
        Box::new(lease.clone()),
        Box::new(lease.clone()),
        Box::new(lease),
    );
}

#[test]
fn the_postgres_lease_meets_the_contract() {
    let Some(pg) = common::postgres::start() else {
        return;
    };
    let open = || Box::new(PostgresLease::new(&pg.url(), TTL).expect("URL parses"));
    contract(open(), open(), open());
}

/// A node whose start-up fails on the actor system's thread drops its
/// connected lease there: closing the connection must not panic inside
/// that runtime.
#[test]
fn a_connected_postgres_lease_can_be_dropped_inside_a_runtime() {
    let Some(pg) = common::postgres::start() else {
        return;
    };
    let mut lease = PostgresLease::new(&pg.url(), TTL).expect("URL parses");
    lease.leader().expect("connected");
    actix_rt::System::new().block_on(async move { drop(lease) });
}

#[test]
fn the_postgres_lease_names_the_database_without_the_password() {
    let port = common::free_port().port();
    let url = format!("postgres://taskyard:hunter2secret@127.0.0.1:{port}/jobs");
    let mut lease = PostgresLease::new(&url, TTL).expect("URL parses");
    let err = lease.leader().expect_err("nothing listens there");
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(!text.contains("hunter2secret"), "{text}");
}

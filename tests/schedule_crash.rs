//! Exactly once across crashes, with a real coordinator process: an
//! every-second schedule (catch-up window one hour, overlap allow, so
//! every slot is due to fire) runs for about 20 s while the coordinator is
//! killed with SIGKILL three times and started again. Afterwards the
//! database must hold exactly one job per slot, for every slot from the
//! first to the last with none missing, its stored fired count must say
//! as many, and no commit may have failed (a second job for a slot would
//! be refused by the key's unique index).

mod common;

use common::db;
use common::rng::XorShift;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use taskyard::scheduler::schedule::keys::parse_slot_key;

const KILLS: usize = 3;
const TICK: &str = r#"{name = "tick", every = "1s", task-type = "echo", payload = {message = "hi"}, overlap = "allow", catchup-window = "1h"}"#;

fn start_coordinator(db: &Path, client: SocketAddr, log: &Path) -> Child {
    let stderr = common::processes::append_log(log);
    Command::new(env!("CARGO_BIN_EXE_taskyard-coordinator"))
        .arg("--db-path")
        .arg(db)
        .args(["--client-listen", &client.to_string()])
        .args(["--worker-listen", &common::free_port().to_string()])
        .arg("--http-listen=")
        .args(["--sweep-interval-millis", "50"])
        .args(["--schedule", TICK])
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start coordinator")
}

/// (slot, job id) of every stored job of schedule `tick`.
fn fired_slots(db: &Path) -> Vec<(i64, String)> {
    let sql = "SELECT idempotency_key, id FROM jobs WHERE idempotency_key LIKE 'schedule:tick:%'";
    let rows: Vec<(String, String)> = db::rows(db, sql, |r| Ok((r.get(0)?, r.get(1)?)));
    let mut slots: Vec<(i64, String)> = rows
        .into_iter()
        .map(|(key, id)| {
            let (_, slot) = parse_slot_key(&key).unwrap_or_else(|| panic!("a slot key: {key}"));
            (slot, id)
        })
        .collect();
    slots.sort();
    slots
}

#[test]
fn kill_9_three_times_fires_every_slot_exactly_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("schedules.db");
    let log = dir.path().join("coordinator.log");
    let client = common::free_port();
    // The seed is printed; TASKYARD_CRASH_SEED replays a failing run.
    let mut rng = XorShift::seeded("schedule crash", "TASKYARD_CRASH_SEED");
    let mut coordinator = start_coordinator(&db, client, &log);
    for _ in 0..KILLS {
        std::thread::sleep(Duration::from_millis(3000 + rng.below(3000)));
        coordinator.kill().expect("kill -9");
        coordinator.wait().expect("reap");
        // Down for a moment: slots come due meanwhile and must catch up.
        std::thread::sleep(Duration::from_millis(rng.below(1500)));
        coordinator = start_coordinator(&db, client, &log);
    }
    std::thread::sleep(Duration::from_millis(3000));
    let _ = Command::new("kill")
        .args(["-TERM", &coordinator.id().to_string()])
        .status();
    coordinator.wait().expect("coordinator exits");

    let slots = fired_slots(&db);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        slots.len() >= 12,
        "about 20 s of slots, got {}:\n{text}",
        slots.len()
    );
    for pair in slots.windows(2) {
        assert_eq!(
            pair[1].0 - pair[0].0,
            1000,
            "consecutive slots, each once: {:?} then {:?}\n{text}",
            pair[0],
            pair[1]
        );
    }
    let stored_fired: Vec<i64> = db::rows(
        &db,
        "SELECT fired FROM schedules WHERE name = 'tick'",
        |r| r.get(0),
    );
    assert_eq!(
        stored_fired,
        vec![slots.len() as i64],
        "the fired count survives every crash, one per slot stored"
    );
    assert!(
        !text.contains("commit failed") && !text.contains("UNIQUE"),
        "no commit failed (a slot submitted twice would):\n{text}"
    );
}

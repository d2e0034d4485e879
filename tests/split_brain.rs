//! Split brain on a real PostgreSQL: the leader is frozen (SIGSTOP) past
//! its lease, the standby takes over and runs jobs, then the old leader is
//! thawed (SIGCONT). It must step down without ever acting again: no worker
//! receives a frame of the old epoch after the new epoch began (frames are
//! recorded at the workers), and a client request the old leader held is
//! never answered.

mod common;

use common::ha_processes::{wait_for_leader, CoordinatorProcess};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use taskyard::client::Client;
use taskyard::protocol::{ClientRequest, CoordinatorToClient, JobId, JobState, SubmitAnswer};
use taskyard::worker::WorkerConfig;
use taskyard::worker::{frame_epoch, ReceivedFrame, TaskRegistry, WorkerHandle};

const LEASE_MILLIS: u64 = 1500;

type Recorded = Arc<Mutex<Vec<(Instant, ReceivedFrame)>>>;

fn worker(i: usize, coordinators: &str, recorded: &Recorded) -> WorkerHandle {
    let config = WorkerConfig {
        coordinator: coordinators.to_string(),
        worker_id: format!("split-worker-{i}"),
        capacity: 4,
        heartbeat_interval_millis: 200,
        reconnect_max_millis: 200,
        coordinator_timeout_millis: 1000,
        ..WorkerConfig::default()
    };
    let recorded = recorded.clone();
    let observer: taskyard::worker::FrameObserver = Arc::new(move |frame: &ReceivedFrame| {
        if let Ok(mut frames) = recorded.lock() {
            frames.push((Instant::now(), frame.clone()));
        }
    });
    WorkerHandle::spawn_observed(
        config,
        TaskRegistry::with_builtins(),
        common::quiet_log(),
        Some(observer),
    )
}

fn submit_and_wait(client: &mut Client, n: usize, label: &str) -> Vec<JobId> {
    let ids: Vec<JobId> = (0..n)
        .map(|i| {
            let request = common::jobs::request(
                "echo",
                serde_json::json!({ "message": format!("{label}-{i}") }),
            );
            match client.submit(request).expect("submit") {
                SubmitAnswer::Accepted { job_id, .. } => job_id,
                SubmitAnswer::Rejected(r) => panic!("rejected: {r}"),
            }
        })
        .collect();
    for id in &ids {
        common::wait_until(
            "the job to succeed",
            Duration::from_secs(30),
            || matches!(client.status(*id), Ok(Some(v)) if v.state == JobState::Succeeded),
        );
    }
    ids
}

#[test]
fn a_leader_frozen_past_its_lease_steps_down_when_thawed_and_never_acts_again() {
    let Some(pg) = common::postgres::start() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let lease = LEASE_MILLIS.to_string();
    let flags = [
        "--leader-lease-millis",
        lease.as_str(),
        "--sweep-interval-millis",
        "50",
    ];
    let coordinators = [
        CoordinatorProcess::start("split-a", &pg.url(), dir.path(), &flags),
        CoordinatorProcess::start("split-b", &pg.url(), dir.path(), &flags),
    ];
    let old = wait_for_leader(
        &[&coordinators[0], &coordinators[1]],
        Duration::from_secs(20),
    );
    let new = 1 - old;
    let clients = format!("{},{}", coordinators[old].client, coordinators[new].client);
    let worker_addrs = format!("{},{}", coordinators[old].worker, coordinators[new].worker);
    let recorded: Recorded = Arc::default();
    let workers: Vec<WorkerHandle> = (0..2)
        .map(|i| worker(i, &worker_addrs, &recorded))
        .collect();
    let mut client = Client::connect(&clients).expect("connect");
    submit_and_wait(&mut client, 5, "before");

    // A client of the old leader, handshaken before the freeze.
    let mut held = common::raw_client::connect(&coordinators[old].client.to_string());
    let hello = common::raw_client::read_frame(&mut held, Duration::from_secs(5));
    assert!(
        matches!(hello, Some(CoordinatorToClient::Hello(_))),
        "{hello:?}"
    );

    coordinators[old].freeze();
    let frozen = Instant::now();
    // Sent while frozen: the old leader reads it once thawed.
    let mut request = common::jobs::request("echo", serde_json::json!({ "message": "held" }));
    request.idempotency_key = Some("split-held".to_string());
    std::io::Write::write_all(
        &mut held,
        &common::raw_client::request_frame(7, ClientRequest::Submit(request)),
    )
    .expect("send to the frozen leader");

    common::wait_until("the standby to take over", Duration::from_secs(20), || {
        coordinators[new].is_ready()
    });
    let took_over = frozen.elapsed();
    let mut client = Client::connect(&coordinators[new].client.to_string()).expect("connect");
    submit_and_wait(&mut client, 10, "after");

    coordinators[old].signal("CONT");
    let thawed = Instant::now();
    common::wait_until(
        "the old leader to stand by",
        Duration::from_secs(10),
        || common::raw_client::named_leader(&coordinators[old].client.to_string()).is_some(),
    );
    println!(
        "standby took over {took_over:?} after the freeze (lease {LEASE_MILLIS} ms); \
         the old leader stood by {:?} after the thaw",
        thawed.elapsed()
    );
    let answer = common::raw_client::read_frame(&mut held, Duration::from_secs(3));
    assert!(
        !matches!(answer, Some(CoordinatorToClient::Response { .. })),
        "the old leader answered after the new epoch began: {answer:?}"
    );
    // Work goes on at the new leader after the thaw.
    submit_and_wait(&mut client, 5, "thawed");
    for w in workers {
        w.stop();
    }

    let frames = recorded.lock().expect("frames").clone();
    let epoch_of = |f: &ReceivedFrame| frame_epoch(&f.frame);
    let new_epoch = frames
        .iter()
        .filter_map(|(_, f)| epoch_of(f))
        .max()
        .expect("frames with epochs");
    let old_epoch = frames
        .iter()
        .filter_map(|(_, f)| epoch_of(f))
        .min()
        .expect("frames with epochs");
    assert!(
        new_epoch > old_epoch,
        "a new epoch began: {old_epoch} -> {new_epoch}"
    );
    let began = frames
        .iter()
        .find(|(_, f)| epoch_of(f) == Some(new_epoch))
        .map(|(at, _)| *at)
        .expect("a frame of the new epoch");
    let late: Vec<_> = frames
        .iter()
        .filter(|(at, f)| *at > began && epoch_of(f).is_some_and(|e| e < new_epoch))
        .collect();
    assert!(
        late.is_empty(),
        "frames of an older epoch after the new one began: {late:?}"
    );
    let stored: i64 = {
        let mut sql = postgres::Client::connect(&pg.url(), postgres::NoTls).expect("connect");
        sql.query_one(
            "SELECT count(*) FROM taskyard.jobs WHERE idempotency_key = 'split-held'",
            &[],
        )
        .expect("count")
        .get(0)
    };
    assert_eq!(stored, 0, "nothing the old leader held was written");
}

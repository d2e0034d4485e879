//! Concurrency keys end to end over TCP: limits declared in the
//! coordinator's config (`[[limit]]`), jobs submitted with keys, a worker
//! that records how many jobs of each key it runs at once. No key ever
//! runs more than its limit, jobs of other keys and without a key are not
//! held back, and every job finishes.

mod common;

use common::jobs::*;
use common::*;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use taskyard::config::limit::DeclaredLimit;
use taskyard::protocol::*;
use taskyard::worker::{decode_payload, Worker};

/// Jobs of each key running now, and the most seen at once.
#[derive(Default)]
struct Seen {
    running: HashMap<String, u32>,
    most: HashMap<String, u32>,
}

#[test]
fn no_key_runs_more_than_its_limit_and_others_pass_it() {
    let mut cluster = Cluster::start_configured(|c| {
        c.limit = vec![
            DeclaredLimit {
                pattern: "acct:*".into(),
                max_running: 2,
            },
            DeclaredLimit {
                pattern: "acct:solo".into(),
                max_running: 1,
            },
        ]
    });
    let seen = Arc::new(Mutex::new(Seen::default()));
    let recorder = seen.clone();
    let config = worker_config(cluster.coordinator().worker_addr, "keys", 16);
    let worker = Worker::builder(config)
        .logger(quiet_log())
        .task("keyed", move |_ctx, payload| {
            let seen = recorder.clone();
            async move {
                #[derive(serde::Deserialize)]
                struct Keyed {
                    key: String,
                }
                let Keyed { key } = decode_payload(&payload)?;
                {
                    let mut seen = seen.lock().expect("lock");
                    let now = {
                        let running = seen.running.entry(key.clone()).or_insert(0);
                        *running += 1;
                        *running
                    };
                    let most = seen.most.entry(key.clone()).or_insert(0);
                    *most = (*most).max(now);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
                *seen.lock().expect("lock").running.entry(key).or_insert(1) -= 1;
                Ok(Vec::new())
            }
        })
        .spawn()
        .expect("worker starts");
    cluster.workers.push(worker);
    cluster.wait_for_workers(1);
    let mut client = cluster.client();
    let mut jobs = Vec::new();
    for i in 0..60 {
        let key = ["acct:a", "acct:b", "acct:solo"][i % 3];
        let req = SubmitRequest {
            concurrency_key: Some(key.to_string()),
            ..request("keyed", json!({ "key": key }))
        };
        jobs.push(submit(&mut client, req));
    }
    // Jobs without a key, and of a key no limit matches, are not held back.
    let free: Vec<JobId> = (0..10)
        .map(|i| {
            let key = format!("other:{i}");
            let req = SubmitRequest {
                concurrency_key: Some(key.clone()),
                ..request("keyed", json!({ "key": key }))
            };
            submit(&mut client, req)
        })
        .collect();
    for job in jobs.iter().chain(&free) {
        let view = wait_for_job(&mut client, *job, "done", Duration::from_secs(30), |v| {
            v.state.is_terminal()
        });
        assert_eq!(view.state, JobState::Succeeded, "{view:?}");
    }
    let seen = seen.lock().expect("lock");
    assert_eq!(
        seen.most.get("acct:solo"),
        Some(&1),
        "exact pattern: 1 at a time"
    );
    for key in ["acct:a", "acct:b"] {
        let most = seen.most.get(key).copied().unwrap_or(0);
        assert!(most <= 2, "{key}: {most} at once, limit 2");
        assert!(most >= 1, "{key} ran");
    }
}

#[test]
fn a_bad_key_is_refused_naming_the_field() {
    let cluster = Cluster::start_configured(|_| {});
    let mut client = cluster.client();
    let req = SubmitRequest {
        concurrency_key: Some("k".repeat(257)),
        ..request("echo", json!({"message": "hi"}))
    };
    match client.submit(req) {
        Ok(SubmitAnswer::Rejected(reason)) => {
            assert!(reason.to_string().contains("concurrency_key"), "{reason}")
        }
        other => panic!("not refused: {other:?}"),
    }
}

//! The paced phase: one job at a time at a fixed interval, so each job
//! meets an idle pipeline and its latency is not queueing behind the others.
//!
//! Submit-to-start is measured in this process: from just before the
//! `Submit` is written (or from when the job fell due, if its connection
//! still waited for an earlier answer then) to the moment the
//! `bench.timed` task starts on a worker (both `Instant`s, microsecond
//! resolution). Submit-to-done is the
//! coordinator's own record, terminal `updated_at` minus `submitted_at`
//! (millisecond resolution): it includes the commit of the result.

use crate::cluster::StartTimes;
use crate::load::finished_counts;
use crate::BenchError;
use serde::Serialize;
use std::time::{Duration, Instant};
use taskyard_client::client::Client;
use taskyard_client::client::ClientOptions;
use taskyard_protocol::{JobId, SubmitAnswer, SubmitRequest};

/// p50, p99 and max of one latency, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Percentiles {
    pub samples: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `values`.
    pub fn of(mut values: Vec<f64>) -> Percentiles {
        values.sort_by(f64::total_cmp);
        let rank = |p: usize| {
            let i = (values.len() * p).div_ceil(100).saturating_sub(1);
            values.get(i).copied().unwrap_or(0.0)
        };
        Percentiles {
            samples: values.len(),
            p50_ms: rank(50),
            p99_ms: rank(99),
            max_ms: values.last().copied().unwrap_or(0.0),
        }
    }
}

/// Both latencies of the paced phase.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    pub interval_ms: u64,
    pub submit_to_start: Percentiles,
    pub submit_to_done: Percentiles,
}

/// Submits `jobs` jobs of `template` one every `interval`, waits for all of
/// them to finish and reads both latencies.
pub fn paced(
    addr: &str,
    options: &ClientOptions,
    jobs: u32,
    interval: Duration,
    template: &SubmitRequest,
    start_times: &StartTimes,
) -> Result<Latency, BenchError> {
    let mut client = Client::connect_with(addr, options)?;
    let pace = Pace {
        jobs,
        interval,
        senders: 1,
        template,
    };
    let samples = paced_samples(&mut client, (addr, options), &pace, start_times)?;
    let mut to_done = Vec::with_capacity(samples.len());
    for sample in &samples {
        if let Some(view) = client.status(sample.job_id)? {
            to_done.push((view.updated_at - view.submitted_at) as f64);
        }
    }
    Ok(Latency {
        interval_ms: interval.as_millis() as u64,
        submit_to_start: Percentiles::of(samples.iter().filter_map(|s| s.to_start_ms).collect()),
        submit_to_done: Percentiles::of(to_done),
    })
}

/// One paced job: when it was submitted, and how long until it started.
#[derive(Debug, Clone, Copy)]
pub struct PacedSample {
    pub job_id: JobId,
    pub submitted: Instant,
    /// `None`: its start was not seen (it ran on a worker of another process).
    pub to_start_ms: Option<f64>,
}

/// Where and how a paced stream is sent.
pub struct Pace<'a> {
    pub jobs: u32,
    pub interval: Duration,
    /// Connections the jobs are dealt over in turn (at least one), each
    /// on a thread of its own: with `senders` of them a connection sends
    /// one job every `senders` intervals, so a job falls due while its
    /// connection still waits for an answer only in a stall longer than
    /// that.
    pub senders: u32,
    pub template: &'a SubmitRequest,
}

impl Pace<'_> {
    /// `senders`, at least one.
    fn connections(&self) -> u32 {
        self.senders.max(1)
    }
}

/// Submits `pace.jobs` jobs one every `pace.interval` (over `client` alone,
/// or over `pace.senders` connections to `addr`), waits for all of them to
/// finish (asking over `client`), and returns each one's submit-to-start.
pub fn paced_samples(
    client: &mut Client,
    connect: (&str, &ClientOptions),
    pace: &Pace,
    start_times: &StartTimes,
) -> Result<Vec<PacedSample>, BenchError> {
    let (base, _) = finished_counts(client, &pace.template.task_type)?;
    let mut sent = match pace.connections() {
        1 => send_paced(client, pace, 0, Instant::now())?,
        senders => {
            let mut clients = (0..senders)
                .map(|_| Client::connect_with(connect.0, connect.1))
                .collect::<Result<Vec<_>, _>>()?;
            let began = Instant::now();
            let each = std::thread::scope(|scope| {
                let threads: Vec<_> = clients
                    .iter_mut()
                    .zip(0..)
                    .map(|(c, k)| scope.spawn(move || send_paced(c, pace, k, began)))
                    .collect();
                threads
                    .into_iter()
                    .map(|t| {
                        t.join()
                            .map_err(|_| BenchError::Failed("a paced sender panicked".into()))?
                    })
                    .collect::<Result<Vec<_>, BenchError>>()
            })?;
            each.into_iter().flatten().collect()
        }
    };
    sent.sort_by_key(|(_, submitted)| *submitted);
    wait_finished(client, &pace.template.task_type, base + sent.len() as u64)?;
    Ok(sent
        .into_iter()
        .map(|(job_id, submitted)| PacedSample {
            job_id,
            submitted,
            to_start_ms: start_times
                .get(job_id)
                .map(|started| started.saturating_duration_since(submitted).as_secs_f64() * 1000.0),
        })
        .collect())
}

/// Sends sender `k`'s share of the stream (jobs `k`, `k + senders`, …, job
/// `i` due at `began + i * interval`) over `client`, one at a time.
///
/// A job that fell due while this connection still waited for the answer
/// to its previous one counts from when it was due, as an independent
/// client would have sent it then: a stall counts for every job it
/// delays, not only for the one it held (no coordinated omission).
fn send_paced(
    client: &mut Client,
    pace: &Pace,
    k: u32,
    began: Instant,
) -> Result<Vec<(JobId, Instant)>, BenchError> {
    let senders = pace.connections();
    let mut sent = Vec::with_capacity((pace.jobs / senders + 1) as usize);
    let mut answered = began;
    for i in (k..pace.jobs).step_by(senders as usize) {
        let due = began + pace.interval * i;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let submitted = match answered > due {
            true => due,
            false => Instant::now(),
        };
        let answer = client.submit(pace.template.clone())?;
        answered = Instant::now();
        match answer {
            SubmitAnswer::Accepted { job_id, .. } => sent.push((job_id, submitted)),
            SubmitAnswer::Rejected(r) => return Err(BenchError::Failed(r.reason)),
        }
    }
    Ok(sent)
}

fn wait_finished(client: &mut Client, task_type: &str, target: u64) -> Result<(), BenchError> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while finished_counts(client, task_type)?.0 < target {
        if Instant::now() > deadline {
            return Err(BenchError::Failed(
                "paced jobs did not finish within 60 s".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let p = Percentiles::of((1..=100).rev().map(f64::from).collect());
        assert_eq!(
            (p.samples, p.p50_ms, p.p99_ms, p.max_ms),
            (100, 50.0, 99.0, 100.0)
        );
        let one = Percentiles::of(vec![3.0]);
        assert_eq!((one.p50_ms, one.p99_ms, one.max_ms), (3.0, 3.0, 3.0));
        assert_eq!(Percentiles::of(Vec::new()).samples, 0);
    }
}

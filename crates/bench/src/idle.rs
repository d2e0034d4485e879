//! `--idle-workers N`: N raw worker connections that register, advertise a
//! task type nobody submits, and only heartbeat. Measures what holding them
//! costs the coordinator.

use crate::cluster::IDLE;
use crate::cpu::{CpuSnapshot, CpuUsed};
use crate::BenchError;
use futures_util::{SinkExt, StreamExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use taskyard_protocol::{
    CoordinatorToWorker, FrameCodec, Hello, ProtocolError, Role, WorkerId, WorkerMessage,
    DEFAULT_MAX_FRAME_BYTES,
};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

/// Heartbeat period of the idle connections (the worker default).
pub const HEARTBEAT: Duration = Duration::from_secs(2);
/// Pause after the last registration before measuring.
const SETTLE: Duration = Duration::from_secs(1);

/// How many connected and what the coordinator spent meanwhile.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct IdleCost {
    pub connections: u64,
    pub heartbeat_ms: u64,
    pub cpu: CpuUsed,
    /// Coordinator thread CPU as a percentage of one core.
    pub coordinator_cpu_percent: Option<f64>,
}

type WorkerFrames = Framed<TcpStream, FrameCodec<CoordinatorToWorker, WorkerMessage>>;

/// Connects `n` idle workers to `worker_addr`, waits until all are
/// registered, then measures CPU over `window` with `snapshot`.
pub fn measure(
    worker_addr: &str,
    n: u32,
    window: Duration,
    snapshot: impl Fn() -> CpuSnapshot,
) -> Result<IdleCost, BenchError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::Failed(format!("cannot build a runtime: {e}")))?;
    let registered = Arc::new(AtomicU64::new(0));
    let stop = CancellationToken::new();
    let result = runtime.block_on(async {
        for i in 0..n {
            let offset = HEARTBEAT * i / n.max(1);
            let (addr, registered, stop) =
                (worker_addr.to_string(), registered.clone(), stop.clone());
            tokio::spawn(async move {
                // A connection that fails simply does not count as registered.
                let _ = idle_worker(&addr, i, offset, &registered, stop).await;
            });
        }
        wait_registered(&registered, u64::from(n)).await?;
        tokio::time::sleep(SETTLE).await;
        let before = snapshot();
        tokio::time::sleep(window).await;
        let cpu = CpuUsed::between(&before, &snapshot());
        stop.cancel();
        Ok(IdleCost {
            connections: registered.load(Ordering::Relaxed),
            heartbeat_ms: HEARTBEAT.as_millis() as u64,
            coordinator_cpu_percent: cpu.coordinator_percent(),
            cpu,
        })
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

async fn wait_registered(registered: &AtomicU64, n: u64) -> Result<(), BenchError> {
    for _ in 0..3000 {
        if registered.load(Ordering::Relaxed) >= n {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(BenchError::Failed(format!(
        "only {} of {n} idle workers registered within 30 s",
        registered.load(Ordering::Relaxed)
    )))
}

async fn idle_worker(
    addr: &str,
    i: u32,
    offset: Duration,
    registered: &AtomicU64,
    stop: CancellationToken,
) -> Result<(), ProtocolError> {
    let stream = TcpStream::connect(addr).await?;
    let mut frames: WorkerFrames = Framed::new(stream, FrameCodec::new(DEFAULT_MAX_FRAME_BYTES));
    frames
        .send(WorkerMessage::Hello(Hello::new(Role::Worker, None)))
        .await?;
    frames.next().await.transpose()?;
    frames
        .send(WorkerMessage::Register {
            worker_id: WorkerId(format!("bench-idle-{}-{i}", std::process::id())),
            capacity: 1,
            task_types: vec![IDLE.to_string()],
            running: Vec::new(),
        })
        .await?;
    frames.next().await.transpose()?;
    registered.fetch_add(1, Ordering::Relaxed);
    tokio::time::sleep(offset).await;
    let mut beat = tokio::time::interval(HEARTBEAT);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = beat.tick() => frames.send(WorkerMessage::Heartbeat).await?,
        }
    }
}

//! The heartbeat: a `Heartbeat` frame every period on its own timer, so a
//! busy task pool never delays it and never causes a false death.

use std::time::Duration;
use taskyard_protocol::WorkerMessage;
use tokio::sync::mpsc;
use tokio::time::{interval_at, Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

/// Sends a heartbeat one `period` after it starts and every `period` after
/// that, until `stop` is cancelled or the writer is gone. A late tick
/// (a stalled writer) delays the following ones rather than bursting.
pub async fn run(period: Duration, frames: mpsc::Sender<WorkerMessage>, stop: CancellationToken) {
    let mut ticks = interval_at(Instant::now() + period, period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if frames.send(WorkerMessage::Heartbeat).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn beats_once_per_period_until_stopped() {
        let (tx, mut rx) = mpsc::channel(16);
        let stop = CancellationToken::new();
        let start = Instant::now();
        let beat = tokio::spawn(run(Duration::from_millis(100), tx, stop.clone()));
        for n in 1..=5u32 {
            assert_eq!(rx.recv().await, Some(WorkerMessage::Heartbeat));
            assert_eq!(start.elapsed(), Duration::from_millis(100) * n);
        }
        stop.cancel();
        beat.await.expect("heartbeat task");
        assert_eq!(rx.recv().await, None, "no beat after stop");
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_before_the_first_period() {
        let (tx, mut rx) = mpsc::channel(16);
        let stop = CancellationToken::new();
        tokio::spawn(run(Duration::from_millis(100), tx, stop.clone()));
        tokio::time::advance(Duration::from_millis(99)).await;
        assert!(rx.try_recv().is_err());
        tokio::time::advance(Duration::from_millis(1)).await;
        tokio::task::yield_now().await;
        assert_eq!(rx.recv().await, Some(WorkerMessage::Heartbeat));
        stop.cancel();
    }
}

//! A worker with a task type of its own, `wordcount`: counts the words of a
//! text, reporting progress as it goes.
//!
//! ```sh
//! cargo run --example custom_worker -- 127.0.0.1:7401
//! taskyard submit wordcount --payload '{"text": "the quick brown fox"}' --wait
//! ```
//!
//! Stop it with Ctrl-C: it drains (finishes what it runs) and exits.

use serde::Deserialize;
use taskyard_client::worker::{decode_payload, TaskContext, TaskError, Worker, WorkerConfig};

#[derive(Deserialize)]
struct WordCount {
    text: String,
}

/// Counts whitespace-separated words; succeeds with the count in decimal.
/// An empty text is a permanent failure: no retry would change it.
pub async fn wordcount(ctx: TaskContext, payload: Vec<u8>) -> Result<Vec<u8>, TaskError> {
    let WordCount { text } = decode_payload(&payload)?;
    if text.trim().is_empty() {
        return Err(TaskError::permanent("payload.text: nothing to count"));
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut words = 0;
    for (i, line) in lines.iter().enumerate() {
        if ctx.cancel.is_cancelled() {
            return Err(TaskError::retryable("cancelled"));
        }
        words += line.split_whitespace().count();
        ctx.progress(
            ((i + 1) * 100 / lines.len()) as u8,
            format!("line {}", i + 1),
        );
        tokio::task::yield_now().await;
    }
    Ok(words.to_string().into_bytes())
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Lets this binary supervise the programs of `exec` tasks (enabled with
    // `exec_allow`); when started as a supervisor it does not return.
    taskyard_client::worker::exec_supervisor::run_if_requested();
    let coordinator = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7401".into());
    let config = WorkerConfig {
        coordinator,
        ..WorkerConfig::default()
    };
    Worker::builder(config).task("wordcount", wordcount).run()?;
    Ok(())
}

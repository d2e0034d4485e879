//! Waiting for the operator to ask a process to stop.

/// What ended a wait of [`wait_for_shutdown_signal_or_end`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// SIGINT or SIGTERM arrived: stop gracefully.
    Signal,
    /// What was watched ended by itself.
    Ended,
}

/// Blocks until SIGINT or SIGTERM arrives, or until `ended` says what the
/// process serves has ended by itself (looked at every 100 ms).
pub fn wait_for_shutdown_signal_or_end(ended: impl Fn() -> bool) -> std::io::Result<Waited> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut look = tokio::time::interval(std::time::Duration::from_millis(100));
        loop {
            tokio::select! {
                result = tokio::signal::ctrl_c() => return result.map(|()| Waited::Signal),
                _ = term.recv() => return Ok(Waited::Signal),
                _ = look.tick() => {
                    if ended() {
                        return Ok(Waited::Ended);
                    }
                }
            }
        }
    })
}

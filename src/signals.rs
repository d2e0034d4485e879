//! Waiting for the operator to ask a process to stop.

/// Blocks until SIGINT (Ctrl-C) or SIGTERM arrives.
pub fn wait_for_shutdown_signal() -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            result = tokio::signal::ctrl_c() => result,
            _ = term.recv() => Ok(()),
        }
    })
}

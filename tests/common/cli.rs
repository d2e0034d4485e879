//! Running the real `taskyard` binary against a coordinator.

use std::process::{Command, Output};

/// `taskyard --coordinator ADDR ARGS...`, its output captured.
pub fn taskyard(coordinator: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_taskyard"))
        .args(["--coordinator", coordinator])
        .args(args)
        .env_remove("TASKYARD_COORDINATOR")
        .output()
        .expect("run taskyard")
}

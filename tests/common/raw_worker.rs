//! A worker that is only a socket: the test speaks the worker protocol by
//! hand, so it decides exactly when (and whether) to heartbeat, answer or
//! hang up, and it sees every frame the coordinator sends.

use bytes::BytesMut;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use taskyard::protocol::{
    CoordinatorToWorker, FrameCodec, Hello, JobId, LeaseId, Role, RunningAttempt, TaskOutcome,
    WorkerId, WorkerMessage, DEFAULT_MAX_FRAME_BYTES, PROTOCOL_VERSION,
};
use tokio_util::codec::{Decoder, Encoder};

/// One registered worker connection driven by the test.
pub struct RawWorker {
    pub worker_id: WorkerId,
    /// Taken just before `Register` was sent: the coordinator's registration
    /// time (its first "heartbeat") is no earlier than this.
    pub registering_at: Instant,
    stream: TcpStream,
    codec: FrameCodec<CoordinatorToWorker, WorkerMessage>,
    received: BytesMut,
}

impl RawWorker {
    /// Connects, exchanges `Hello`, registers and waits for `Registered`.
    /// After that the worker sends nothing unless the test says so.
    pub fn register(addr: SocketAddr, id: &str, capacity: u32, task_types: &[&str]) -> RawWorker {
        let mut worker = RawWorker::greet(addr, id);
        let types = task_types.iter().map(|t| t.to_string()).collect();
        match worker.send_register(capacity, types) {
            Some(CoordinatorToWorker::Registered { .. }) => worker,
            other => panic!("expected Registered, got {other:?}"),
        }
    }

    /// Connects and exchanges `Hello`; registers nothing.
    pub fn greet(addr: SocketAddr, id: &str) -> RawWorker {
        let stream = TcpStream::connect(addr).expect("raw worker connects");
        stream.set_nodelay(true).expect("nodelay");
        let mut worker = RawWorker {
            worker_id: WorkerId(id.to_string()),
            registering_at: Instant::now(),
            stream,
            codec: FrameCodec::new(DEFAULT_MAX_FRAME_BYTES),
            received: BytesMut::new(),
        };
        worker.send(WorkerMessage::Hello(Hello {
            protocol_version: PROTOCOL_VERSION,
            role: Role::Worker,
            token: None,
            http: None,
        }));
        let hello = worker.recv(Duration::from_secs(5));
        assert!(
            matches!(hello, Some(CoordinatorToWorker::Hello(_))),
            "{hello:?}"
        );
        worker
    }

    /// Sends `Register` and returns the coordinator's answer (`None`: it
    /// closed the connection without one).
    pub fn send_register(
        &mut self,
        capacity: u32,
        task_types: Vec<String>,
    ) -> Option<CoordinatorToWorker> {
        self.send_register_claiming(capacity, task_types, Vec::new())
    }

    /// `send_register` listing `running`, the attempts this worker says
    /// it still holds.
    pub fn send_register_claiming(
        &mut self,
        capacity: u32,
        task_types: Vec<String>,
        running: Vec<RunningAttempt>,
    ) -> Option<CoordinatorToWorker> {
        self.registering_at = Instant::now();
        self.send(WorkerMessage::Register {
            worker_id: self.worker_id.clone(),
            capacity,
            task_types,
            running,
        });
        self.recv(Duration::from_secs(5))
    }

    pub fn send(&mut self, frame: WorkerMessage) {
        let mut bytes = BytesMut::new();
        self.codec.encode(frame, &mut bytes).expect("encode");
        self.stream.write_all(&bytes).expect("raw worker writes");
    }

    /// A second handle on the connection's socket, for a thread that only
    /// writes (heartbeats) while this one does not read.
    pub fn socket(&self) -> TcpStream {
        self.stream.try_clone().expect("clone the socket")
    }

    /// `frame` as the bytes this worker would send.
    pub fn encoded(&mut self, frame: WorkerMessage) -> Vec<u8> {
        let mut bytes = BytesMut::new();
        self.codec.encode(frame, &mut bytes).expect("encode");
        bytes.to_vec()
    }

    pub fn send_result(&mut self, job_id: JobId, lease: LeaseId, outcome: TaskOutcome) {
        self.send(WorkerMessage::TaskResult {
            job_id,
            lease,
            outcome,
        });
    }

    /// The next frame, or `None` once the coordinator closed the connection.
    /// Panics if nothing arrives within `within`.
    pub fn recv(&mut self, within: Duration) -> Option<CoordinatorToWorker> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(frame) = self.codec.decode(&mut self.received).expect("valid frame") {
                return Some(frame);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no frame from the coordinator in {within:?}"
            );
            self.stream.set_read_timeout(Some(left)).expect("timeout");
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.received.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }

    /// Waits for the next `TaskAssign` and returns its job and lease.
    pub fn expect_assign(&mut self, within: Duration) -> (JobId, LeaseId) {
        match self.recv(within) {
            Some(CoordinatorToWorker::TaskAssign { job_id, lease, .. }) => (job_id, lease),
            other => panic!("expected TaskAssign, got {other:?}"),
        }
    }
}

//! A stand-in for a standby coordinator: a real TCP listener that reads a
//! peer's `Hello` and answers `NotLeader { leader }` instead, then closes,
//! as a real standby does. Until real standbys exist, this is what lets a
//! test check that the client, the CLI and a worker go to the leader.
//!
//! `HangUp` is the other stand-in: a coordinator that greets one client,
//! then drops the connection after reading its first request, unanswered
//! (a leader dying with a request in flight), and stops listening.

use bytes::BytesMut;
use serde::Serialize;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use taskyard::protocol::{
    ClientMessage, CoordinatorToClient, CoordinatorToWorker, FrameCodec, Hello, LeaderAddresses,
    Role, WorkerMessage, PROTOCOL_VERSION,
};
use tokio_util::codec::Encoder;

/// See the module documentation. Serves until dropped (its thread ends
/// with the process; it only ever blocks in `accept`).
pub struct FakeStandby {
    pub addr: SocketAddr,
    /// Peers answered so far.
    pub answered: Arc<AtomicUsize>,
    _thread: JoinHandle<()>,
}

impl FakeStandby {
    /// A standby of the client port naming `leader`.
    pub fn for_clients(leader: Option<LeaderAddresses>) -> FakeStandby {
        let frame = encode::<ClientMessage, _>(CoordinatorToClient::NotLeader { leader });
        FakeStandby::serving(frame)
    }

    /// A standby of the worker port naming `leader`.
    pub fn for_workers(leader: Option<LeaderAddresses>) -> FakeStandby {
        let frame = encode::<WorkerMessage, _>(CoordinatorToWorker::NotLeader { leader });
        FakeStandby::serving(frame)
    }

    fn serving(frame: Vec<u8>) -> FakeStandby {
        let listener = TcpListener::bind("127.0.0.1:0").expect("standby binds");
        let addr = listener.local_addr().expect("standby addr");
        let answered = Arc::new(AtomicUsize::new(0));
        let counter = answered.clone();
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                if read_frame(&mut stream).is_some() {
                    // Counted before the write: the peer may act on the
                    // answer (and the test check the count) at once.
                    counter.fetch_add(1, Ordering::SeqCst);
                    let _ = stream.write_all(&frame);
                }
            }
        });
        FakeStandby {
            addr,
            answered,
            _thread: thread,
        }
    }
}

/// The leader's addresses as a standby would advertise them.
pub fn leader_at(client: Option<SocketAddr>, worker: Option<SocketAddr>) -> LeaderAddresses {
    LeaderAddresses {
        node: "leader".into(),
        epoch: 1,
        client: client.map(|a| a.to_string()),
        worker: worker.map(|a| a.to_string()),
        http: None,
    }
}

/// See the module documentation.
pub struct HangUp {
    pub addr: SocketAddr,
    thread: Option<JoinHandle<usize>>,
}

impl HangUp {
    pub fn start() -> HangUp {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
        let addr = listener.local_addr().expect("addr");
        let thread = std::thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else {
                return 0;
            };
            drop(listener);
            read_frame(&mut stream);
            let hello = Hello::new(Role::Client, None);
            assert_eq!(hello.protocol_version, PROTOCOL_VERSION);
            let _ = stream.write_all(&encode::<ClientMessage, _>(CoordinatorToClient::Hello(
                hello,
            )));
            read_frame(&mut stream).map_or(0, |f| f.len())
        });
        HangUp {
            addr,
            thread: Some(thread),
        }
    }

    /// Waits until the request was read and the connection dropped; the
    /// size of the request frame it swallowed.
    pub fn swallowed(mut self) -> usize {
        self.thread
            .take()
            .map_or(0, |t| t.join().expect("hang-up thread"))
    }
}

/// One length-prefixed frame's body, or `None` if the peer went away.
fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(body)
}

fn encode<In, Out: Serialize>(frame: Out) -> Vec<u8> {
    let mut codec = FrameCodec::<In, Out>::new(1 << 20);
    let mut bytes = BytesMut::new();
    codec.encode(frame, &mut bytes).expect("encode");
    bytes.to_vec()
}

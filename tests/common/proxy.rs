//! A fault-injecting TCP proxy: a network partition at a named point
//! (STYLE.md 17). Each accepted connection is forwarded to `upstream` by two
//! pump threads, one per direction.
//!
//! `freeze` stops forwarding in both directions without closing anything:
//! bytes already read are held, the rest stay in the kernel's buffers, and
//! an end of stream (either side closing) is held too. `heal` resumes
//! forwarding, in order, so everything held arrives late — including a
//! close, which the other side then sees as a dead connection.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// See the module documentation. Dropping it closes every connection.
pub struct Proxy {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    accepter: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    frozen: Mutex<bool>,
    healed: Condvar,
    closing: AtomicBool,
    accepted: AtomicUsize,
    /// Clones of every socket, so that drop can shut them down.
    sockets: Mutex<Vec<TcpStream>>,
}

impl Proxy {
    /// Listens on an ephemeral loopback port and forwards to `upstream`.
    pub fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy binds");
        let addr = listener.local_addr().expect("proxy addr");
        let shared = Arc::new(Shared::default());
        let accepting = shared.clone();
        let accepter = std::thread::Builder::new()
            .name("proxy-accept".into())
            .spawn(move || accept_loop(listener, upstream, accepting))
            .expect("proxy thread");
        Proxy {
            addr,
            shared,
            accepter: Some(accepter),
        }
    }

    /// Stops forwarding in both directions; connections stay open.
    pub fn freeze(&self) {
        *self.shared.frozen.lock().expect("lock") = true;
    }

    /// Resumes forwarding, delivering everything held in order.
    pub fn heal(&self) {
        *self.shared.frozen.lock().expect("lock") = false;
        self.shared.healed.notify_all();
    }

    /// Connections accepted so far (a reconnect counts again).
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.closing.store(true, Ordering::SeqCst);
        self.heal();
        for socket in self.shared.sockets.lock().expect("lock").drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
        // Wakes the blocking accept so the thread sees `closing`.
        let _ = TcpStream::connect(self.addr);
        if let Some(accepter) = self.accepter.take() {
            let _ = accepter.join();
        }
    }
}

impl Shared {
    fn wait_while_frozen(&self) {
        let frozen = self.frozen.lock().expect("lock");
        let _unfrozen = self
            .healed
            .wait_while(frozen, |frozen| *frozen)
            .expect("lock");
    }

    fn track(&self, socket: &TcpStream) {
        if let Ok(clone) = socket.try_clone() {
            self.sockets.lock().expect("lock").push(clone);
        }
    }
}

fn accept_loop(listener: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    for downstream in listener.incoming() {
        if shared.closing.load(Ordering::SeqCst) {
            return;
        }
        let Ok(downstream) = downstream else { continue };
        let Ok(upstream) = TcpStream::connect(upstream) else {
            continue;
        };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        let _ = (downstream.set_nodelay(true), upstream.set_nodelay(true));
        shared.track(&downstream);
        shared.track(&upstream);
        for (from, to) in [(&downstream, &upstream), (&upstream, &downstream)] {
            let (from, to) = (
                from.try_clone().expect("clone"),
                to.try_clone().expect("clone"),
            );
            let shared = shared.clone();
            std::thread::spawn(move || pump(from, to, &shared));
        }
    }
}

/// Copies `from` to `to`, holding each chunk (and the final end of stream)
/// while the proxy is frozen. When `to` can no longer be written, `from` is
/// closed so its peer learns the connection is gone.
fn pump(mut from: TcpStream, mut to: TcpStream, shared: &Shared) {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        shared.wait_while_frozen();
        if to.write_all(&chunk[..n]).is_err() {
            let _ = from.shutdown(Shutdown::Both);
            break;
        }
    }
    shared.wait_while_frozen();
    let _ = to.shutdown(Shutdown::Write);
}

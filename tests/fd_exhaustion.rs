//! A coordinator whose process has run out of file descriptors still tells
//! new clients why they are refused instead of leaving them hanging, and
//! serves again once descriptors are free. Its own test binary: it lowers
//! the process's open-files limit, which would disturb other tests.

// `rlim_t` is u64 on Linux but not on every platform.
#![allow(clippy::unnecessary_cast)]

mod common;

use common::raw_client::read_frame;
use common::{wait_until, Cluster};
use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::FromRawFd;
use std::time::Duration;
use taskyard::protocol::CoordinatorToClient;

fn limit() -> libc::rlimit {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    limit
}

fn set_soft_limit(soft: u64) {
    let limit = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: limit().rlim_max,
    };
    // SAFETY: setrlimit only reads the struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
}

/// A TCP socket created now, connected later (connecting takes no descriptor).
fn unconnected_socket() -> i32 {
    // SAFETY: plain socket(2); the descriptor is owned by the caller.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    assert!(fd >= 0, "socket");
    fd
}

fn connect(fd: i32, addr: SocketAddr) -> TcpStream {
    let SocketAddr::V4(v4) = addr else {
        panic!("IPv4 loopback expected")
    };
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*v4.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sin is a valid sockaddr_in of the size passed.
    let rc = unsafe {
        libc::connect(
            fd,
            &sin as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "connect: {}", std::io::Error::last_os_error());
    // SAFETY: fd is an open socket nobody else owns.
    unsafe { TcpStream::from_raw_fd(fd) }
}

fn open_fd_numbers() -> Vec<u64> {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .collect()
}

/// Lowers the soft limit to just above the highest open descriptor and
/// takes every descriptor below it that is still free.
fn exhaust_descriptors() -> Vec<File> {
    let highest = open_fd_numbers()
        .into_iter()
        .max()
        .expect("some descriptor");
    set_soft_limit(highest + 1);
    fill()
}

/// Takes every descriptor the process could still open.
fn fill() -> Vec<File> {
    std::iter::from_fn(|| File::open("/dev/null").ok()).collect()
}

#[test]
fn out_of_descriptors_new_clients_get_the_typed_refusal_and_service_resumes() {
    // Sessions the coordinator does accept keep their descriptor for the
    // whole test (no Hello is ever sent, and nothing times it out), so the
    // only descriptors freed meanwhile are ones the test takes back.
    let cluster = Cluster::start_configured(|c| c.handshake_timeout_millis = 60_000);
    let addr: SocketAddr = cluster.client_addr().parse().expect("addr");
    assert!(serves(&cluster), "serves before the test");
    let sockets: Vec<i32> = (0..ATTEMPTS).map(|_| unconnected_socket()).collect();
    let soft_before = limit().rlim_cur as u64;

    let mut fillers = exhaust_descriptors();
    let mut opened = Vec::new();
    let mut replies = Vec::new();
    for fd in sockets {
        // Until the first refusal, descriptors the process freed meanwhile
        // (the connection `serves` made, closing) are taken back first.
        // After it, nothing is taken: the coordinator closes the refused
        // connection and reopens its spare at a moment of its own choosing.
        if replies.is_empty() {
            fillers.extend(fill());
        }
        let mut stream = connect(fd, addr);
        match read_frame(&mut stream, Duration::from_secs(3)) {
            Some(reply) => replies.push(reply),
            None if replies.is_empty() => {}
            None => panic!("a connection after the first refusal hangs: {replies:?}"),
        }
        // Kept open: closing this end would free a descriptor of this
        // process, which the coordinator shares.
        opened.push(stream);
        if replies.len() == REFUSALS {
            break;
        }
    }
    drop(fillers);
    drop(opened);
    set_soft_limit(soft_before);

    let refusal = |reply: &CoordinatorToClient| {
        matches!(reply, CoordinatorToClient::Error { message }
            if message.starts_with("too many connections") && message.contains("file descriptors"))
    };
    assert_eq!(replies.len(), REFUSALS, "answers: {replies:?}");
    assert!(
        replies.iter().all(refusal),
        "every answer a refusal: {replies:?}"
    );
    wait_until(
        "the coordinator to serve again",
        Duration::from_secs(10),
        || serves(&cluster),
    );
}

/// Connections tried with the process out of descriptors.
const ATTEMPTS: usize = 8;

/// Refusals in a row the test waits for.
const REFUSALS: usize = 3;

fn serves(cluster: &Cluster) -> bool {
    taskyard::client::Client::connect(&cluster.client_addr())
        .and_then(|mut c| c.workers())
        .is_ok()
}

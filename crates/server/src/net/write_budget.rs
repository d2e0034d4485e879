//! Backpressure between what a session writes and what it reads.
//!
//! `actix::io::FramedWrite` buffers every frame in memory until the socket
//! takes it, and never refuses one: a peer that sends requests but does not
//! read the answers would make it grow without bound. So a session counts
//! the bytes it encodes ([`CountingEncoder`]) and the bytes the socket
//! accepts ([`CountingWrite`]), and its reader ([`Gated`]) stops asking for
//! frames while the difference exceeds the budget. The peer's requests then
//! wait in the kernel's buffers and finally in the peer's own, and what the
//! coordinator holds for it stays within the budget plus the answers to the
//! requests it had already read.

use bytes::BytesMut;
use futures_util::Stream;
use std::cell::{Cell, RefCell};
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use tokio::io::AsyncWrite;
use tokio_util::codec::Encoder;

/// Bytes encoded for peers but not yet accepted by their sockets, summed
/// over every session of one listener. Cheap to clone; all clones share one
/// count.
#[derive(Debug, Clone, Default)]
pub struct UnwrittenBytes(Arc<AtomicU64>);

impl UnwrittenBytes {
    /// The current total.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::SeqCst);
    }

    fn sub(&self, n: u64) {
        self.0.fetch_sub(n, Ordering::SeqCst);
    }
}

/// One connection's write accounting, shared by its encoder, its writer and
/// its reader (all on the session's thread). When the last of them is
/// dropped, its unwritten bytes leave the listener's total.
pub struct WriteMeter {
    /// Every byte ever encoded for this connection.
    queued: Cell<u64>,
    /// Every byte the socket has accepted.
    written: Cell<u64>,
    /// The reader pauses while more than this is unwritten.
    budget: u64,
    /// The paused reader, woken when the backlog falls within the budget.
    reader: RefCell<Option<Waker>>,
    total: UnwrittenBytes,
}

impl WriteMeter {
    /// A meter whose reader pauses above `budget` unwritten bytes, adding
    /// this connection's backlog to `total`.
    pub fn new(budget: usize, total: UnwrittenBytes) -> Rc<WriteMeter> {
        Rc::new(WriteMeter {
            queued: Cell::new(0),
            written: Cell::new(0),
            budget: budget as u64,
            reader: RefCell::new(None),
            total,
        })
    }

    /// Bytes encoded but not yet accepted by the socket.
    pub fn unwritten(&self) -> u64 {
        self.queued.get() - self.written.get()
    }

    /// Offset in this connection's byte stream just past the last frame
    /// encoded: that frame is on the socket once [`WriteMeter::written`]
    /// reaches it.
    pub fn queued(&self) -> u64 {
        self.queued.get()
    }

    /// Offset up to which the socket has accepted the stream.
    pub fn written(&self) -> u64 {
        self.written.get()
    }

    fn over_budget(&self) -> bool {
        self.unwritten() > self.budget
    }

    fn on_encoded(&self, n: u64) {
        self.queued.set(self.queued.get() + n);
        self.total.add(n);
    }

    fn on_written(&self, n: u64) {
        self.written.set(self.written.get() + n);
        self.total.sub(n);
        if !self.over_budget() {
            if let Some(reader) = self.reader.borrow_mut().take() {
                reader.wake();
            }
        }
    }
}

impl Drop for WriteMeter {
    fn drop(&mut self) {
        self.total.sub(self.unwritten());
    }
}

/// An encoder that reports the size of every frame it encodes to a meter.
pub struct CountingEncoder<E> {
    inner: E,
    meter: Rc<WriteMeter>,
}

impl<E> CountingEncoder<E> {
    pub fn new(inner: E, meter: Rc<WriteMeter>) -> Self {
        CountingEncoder { inner, meter }
    }
}

impl<I, E: Encoder<I>> Encoder<I> for CountingEncoder<E> {
    type Error = E::Error;

    fn encode(&mut self, item: I, dst: &mut BytesMut) -> Result<(), E::Error> {
        let before = dst.len();
        let encoded = self.inner.encode(item, dst);
        self.meter
            .on_encoded(dst.len().saturating_sub(before) as u64);
        encoded
    }
}

/// A writer that reports every byte its socket accepts to a meter.
pub struct CountingWrite<W> {
    inner: W,
    meter: Rc<WriteMeter>,
}

impl<W> CountingWrite<W> {
    pub fn new(inner: W, meter: Rc<WriteMeter>) -> Self {
        CountingWrite { inner, meter }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for CountingWrite<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.meter.on_written(n as u64);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A stream of frames that yields nothing while its meter is over budget:
/// the frames stay unread in the socket until the peer reads its answers.
pub struct Gated<S> {
    inner: S,
    meter: Rc<WriteMeter>,
}

impl<S> Gated<S> {
    pub fn new(inner: S, meter: Rc<WriteMeter>) -> Self {
        Gated { inner, meter }
    }
}

impl<S: Stream + Unpin> Stream for Gated<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        if self.meter.over_budget() {
            *self.meter.reader.borrow_mut() = Some(cx.waker().clone());
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_next(cx)
    }
}

/// Whether a peer that is owed more than a budget of bytes is still taking
/// them. A worker's reads are not paused (its heartbeats and results must
/// keep arriving while it drains a burst of assignments); instead a worker
/// whose socket has taken less than [`MIN_PROGRESS_BYTES`] in `patience`
/// while over the budget is not reading, and is dropped.
#[derive(Debug)]
pub struct StallWatch {
    budget: u64,
    patience: std::time::Duration,
    /// Since when the backlog has been over the budget, and how far the
    /// socket had got then.
    over_since: Option<(std::time::Instant, u64)>,
}

/// Progress that counts as reading: a peer that takes less than this while
/// over its budget is treated as not reading.
pub const MIN_PROGRESS_BYTES: u64 = 64 * 1024;

impl StallWatch {
    pub fn new(budget: usize, patience: std::time::Duration) -> StallWatch {
        StallWatch {
            budget: budget as u64,
            patience,
            over_since: None,
        }
    }

    /// Looks at the connection at `now` (`unwritten` bytes owed, `written`
    /// taken so far); true once it has been over the budget for `patience`
    /// without taking [`MIN_PROGRESS_BYTES`].
    pub fn stalled(&mut self, unwritten: u64, written: u64, now: std::time::Instant) -> bool {
        if unwritten <= self.budget {
            self.over_since = None;
            return false;
        }
        match self.over_since {
            Some((since, mark)) if written.saturating_sub(mark) < MIN_PROGRESS_BYTES => {
                now.saturating_duration_since(since) >= self.patience
            }
            _ => {
                self.over_since = Some((now, written));
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[test]
    fn the_total_follows_encoded_minus_written_and_forgets_a_dropped_meter() {
        let total = UnwrittenBytes::default();
        let meter = WriteMeter::new(10, total.clone());
        meter.on_encoded(25);
        meter.on_written(5);
        assert_eq!((meter.unwritten(), total.get()), (20, 20));
        drop(meter);
        assert_eq!(total.get(), 0);
    }

    #[tokio::test]
    async fn the_reader_pauses_over_budget_and_resumes_when_written() {
        let meter = WriteMeter::new(10, UnwrittenBytes::default());
        let mut frames = Gated::new(futures_util::stream::iter([1, 2]), Rc::clone(&meter));
        assert_eq!(frames.next().await, Some(1));
        meter.on_encoded(11);
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(frames.poll_next_unpin(&mut cx).is_pending());
        meter.on_written(1);
        assert_eq!(frames.next().await, Some(2));
    }

    #[test]
    fn a_peer_over_budget_is_stalled_only_once_it_stops_taking_bytes_for_the_patience() {
        use std::time::{Duration, Instant};
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut watch = StallWatch::new(1000, Duration::from_secs(6));
        assert!(!watch.stalled(500, 0, at(0)), "within budget");
        assert!(!watch.stalled(5000, 0, at(0)), "over: the clock starts");
        assert!(
            !watch.stalled(5000, 100_000, at(5000)),
            "it took 100 KB: starts again"
        );
        assert!(!watch.stalled(5000, 100_000, at(10_999)));
        assert!(
            watch.stalled(5000, 110_000, at(11_000)),
            "6 s without 64 KiB taken"
        );
        assert!(!watch.stalled(10, 110_000, at(12_000)), "drained: forgiven");
        assert!(!watch.stalled(5000, 110_000, at(13_000)), "a new episode");
    }
}

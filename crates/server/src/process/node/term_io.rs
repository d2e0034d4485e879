//! A connection's halves bound to a term of leadership: once the term's
//! token is cancelled (the node stepped down), reads end (EOF) and writes
//! fail, so every session of the term closes without being told, and
//! nothing more reaches its peer.

use crate::net::listener::{ReadHalf, WriteHalf};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// Both halves bound to `token`.
pub fn bind(read: ReadHalf, write: WriteHalf, token: &CancellationToken) -> (ReadHalf, WriteHalf) {
    (
        Box::new(TermBound::new(read, token)),
        Box::new(TermBound::new(write, token)),
    )
}

/// One half bound to a term.
pub struct TermBound<T> {
    inner: T,
    ended: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<T> TermBound<T> {
    fn new(inner: T, token: &CancellationToken) -> Self {
        TermBound {
            inner,
            ended: Box::pin(token.clone().cancelled_owned()),
        }
    }

    /// True once the term ended; also registers the task to be woken then.
    fn term_ended(&mut self, cx: &mut Context<'_>) -> bool {
        self.ended.as_mut().poll(cx).is_ready()
    }
}

fn term_over() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "this coordinator stepped down: the leader lease is lost",
    )
}

impl<T: AsyncRead + Unpin> AsyncRead for TermBound<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.term_ended(cx) {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TermBound<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.term_ended(cx) {
            return Poll::Ready(Err(term_over()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.term_ended(cx) {
            return Poll::Ready(Err(term_over()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[actix_rt::test]
    async fn a_cancelled_term_ends_a_blocked_read_and_refuses_writes() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let (read, write) = tokio::io::split(ours);
        let token = CancellationToken::new();
        let (mut read, mut write) = bind(Box::new(read), Box::new(write), &token);
        write.write_all(b"hi").await.expect("term open");
        let mut got = [0u8; 2];
        theirs.read_exact(&mut got).await.expect("delivered");
        let blocked = actix_rt::spawn(async move {
            let mut buf = [0u8; 8];
            read.read(&mut buf).await
        });
        tokio::task::yield_now().await;
        token.cancel();
        let n = blocked.await.expect("joined").expect("EOF, not an error");
        assert_eq!(n, 0, "the read ends as if the peer closed");
        let err = write.write_all(b"late").await.expect_err("refused");
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        theirs.write_all(b"x").await.ok();
        let mut rest = Vec::new();
        drop(write);
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            theirs.read_to_end(&mut rest),
        )
        .await;
        assert!(rest.is_empty(), "nothing written after the term ended");
    }
}

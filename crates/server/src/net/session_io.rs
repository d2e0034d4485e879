//! The connection plumbing both sessions share: the framed reader and
//! writer, the phase that stops a closing session from reading or writing
//! more, the handshake timer and the clean close. A session's own file keeps
//! only its protocol: which frame is allowed in which phase and where it goes.
//!
//! Closing is always the same three steps: write the error frame (if any),
//! mark the session closing, then `close()` the `FramedWrite`. Actix flushes
//! what is buffered before it calls `WriteHandler::finished`, which stops the
//! actor, so the peer always receives the error frame that explains the close.

use crate::net::handshake::{ListenerPolicy, SessionContext};
use crate::net::write_budget::{CountingEncoder, CountingWrite, Gated, WriteMeter};
use actix::io::{FramedWrite, WriteHandler};
use actix::{Actor, ActorContext, AsyncContext, Context, Running, StreamHandler};
use serde::de::DeserializeOwned;
use serde::Serialize;
use slog::{warn, Logger};
use std::rc::Rc;
use taskyard_protocol::{
    CoordinatorToClient, CoordinatorToWorker, FrameCodec, ProtocolError, Role,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::FramedRead;

/// A session's phases, as far as the shared plumbing needs to know them.
pub trait SessionPhase: Copy + PartialEq + 'static {
    /// Where every session starts; the handshake timer closes a session
    /// that is still here when it fires.
    const AWAITING_HELLO: Self;
    /// Entered by [`SessionIo::close`] and never left: nothing more is
    /// forwarded, and the actor stops once the writer is flushed.
    const CLOSING: Self;

    /// The frame the handshake still waits for in this phase, if it is not
    /// over: the handshake timer closes a session for which this is `Some`.
    fn awaited(self) -> Option<&'static str> {
        (self == Self::AWAITING_HELLO).then_some("Hello")
    }
}

/// What the coordinator sends on one kind of connection.
pub trait SessionFrame: Serialize + 'static {
    /// The peer on the other end, named in log lines.
    const PEER: Role;
    /// The frame that tells the peer why its connection is being closed.
    fn error(message: String) -> Self;
}

impl SessionFrame for CoordinatorToClient {
    const PEER: Role = Role::Client;

    fn error(message: String) -> Self {
        CoordinatorToClient::Error { message }
    }
}

impl SessionFrame for CoordinatorToWorker {
    const PEER: Role = Role::Worker;

    fn error(message: String) -> Self {
        CoordinatorToWorker::Error { message }
    }
}

/// One connection of a session: it reads `In` frames, writes `Out` frames
/// to `W`, and is in phase `P`. Owns the connection's `SessionContext`, so
/// the listener's slot is held exactly as long as the session.
///
/// Reading pauses while more than the listener's `max_unwritten_bytes` are
/// encoded but not yet taken by the socket (see `write_budget`).
pub struct SessionIo<P, In, Out, W>
where
    Out: SessionFrame,
    W: AsyncWrite + Unpin + 'static,
{
    writer: FramedWrite<Out, CountingWrite<W>, CountingEncoder<FrameCodec<In, Out>>>,
    meter: Rc<WriteMeter>,
    phase: P,
    conn: SessionContext,
    log: Logger,
}

impl<P, In, Out, W> SessionIo<P, In, Out, W>
where
    P: SessionPhase,
    In: DeserializeOwned + 'static,
    Out: SessionFrame,
    W: AsyncWrite + Unpin + 'static,
{
    /// Feeds the frames read from `read` to the actor's `StreamHandler` and
    /// writes to `write`, both bounded by the listener's `max_frame_bytes`.
    /// The session starts in `P::AWAITING_HELLO` and logs to `log`.
    pub fn open<A, R>(
        read: R,
        write: W,
        conn: SessionContext,
        log: Logger,
        ctx: &mut Context<A>,
    ) -> Self
    where
        A: Actor<Context = Context<A>>
            + StreamHandler<Result<In, ProtocolError>>
            + WriteHandler<ProtocolError>,
        R: AsyncRead + Unpin + 'static,
    {
        let max_frame_bytes = conn.policy.max_frame_bytes;
        let meter = WriteMeter::new(
            conn.policy.max_unwritten_bytes,
            conn.policy.unwritten.clone(),
        );
        let frames = FramedRead::new(read, FrameCodec::<In, Out>::new(max_frame_bytes));
        ctx.add_stream(Gated::new(frames, Rc::clone(&meter)));
        let write = CountingWrite::new(write, Rc::clone(&meter));
        let encoder = CountingEncoder::new(FrameCodec::new(max_frame_bytes), Rc::clone(&meter));
        SessionIo {
            writer: FramedWrite::new(write, encoder, ctx),
            meter,
            phase: P::AWAITING_HELLO,
            conn,
            log,
        }
    }

    /// The rules of the listener this connection came in on.
    pub fn policy(&self) -> &ListenerPolicy {
        &self.conn.policy
    }

    pub fn log(&self) -> &Logger {
        &self.log
    }

    pub fn phase(&self) -> P {
        self.phase
    }

    /// Moves the session to `phase`, unless it is closing: closing is final.
    pub fn set_phase(&mut self, phase: P) {
        if self.phase != P::CLOSING {
            self.phase = phase;
        }
    }

    pub fn is_closing(&self) -> bool {
        self.phase == P::CLOSING
    }

    /// Queues `frame` and returns the offset in the connection's byte
    /// stream where it ends: it is on the socket once
    /// [`SessionIo::written`] reaches that offset. An encoding error
    /// reaches `WriteHandler::error`, which ends the session.
    pub fn write(&mut self, frame: Out) -> u64 {
        self.writer.write(frame);
        self.meter.queued()
    }

    /// How far into the connection's byte stream the socket has accepted.
    pub fn written(&self) -> u64 {
        self.meter.written()
    }

    /// Bytes encoded for the peer that its socket has not taken yet.
    pub fn unwritten(&self) -> u64 {
        self.meter.unwritten()
    }

    /// Marks the session closing and closes the writer once what is queued
    /// is flushed; `WriteHandler::finished` then stops the actor.
    pub fn close(&mut self) {
        self.phase = P::CLOSING;
        self.writer.close();
    }

    /// Sends an error frame saying why, then closes as [`SessionIo::close`].
    pub fn close_with_error(&mut self, message: String) {
        warn!(self.log, "closing {} connection", Out::PEER; "reason" => &message);
        self.write(Out::error(message));
        self.close();
    }

    /// [`SessionIo::close_with_error`] for a peer that may not be reading:
    /// if the error frame is not flushed within the handshake timeout the
    /// session stops anyway, so not reading cannot keep a connection slot.
    pub fn close_with_error_bounded<A>(&mut self, message: String, ctx: &mut Context<A>)
    where
        A: Actor<Context = Context<A>>,
    {
        self.close_with_error(message);
        ctx.run_later(self.conn.policy.handshake_timeout, |_, ctx| ctx.stop());
    }

    /// Arms the handshake timer: a session whose handshake is not over (see
    /// [`SessionPhase::awaited`]) after the listener's handshake timeout is
    /// closed with an error frame naming the frame it waited for.
    /// `io` finds this `SessionIo` in the actor. Call from `Actor::started`.
    pub fn arm_handshake_timer<A>(&self, ctx: &mut Context<A>, io: fn(&mut A) -> &mut Self)
    where
        A: Actor<Context = Context<A>>,
    {
        ctx.run_later(self.conn.policy.handshake_timeout, move |act, _| {
            let io = io(act);
            if let Some(awaited) = io.phase.awaited() {
                io.close_with_error(io.conn.handshake_expired(awaited));
            }
        });
    }

    /// For `StreamHandler::finished`: the peer closed its side. A closing
    /// session keeps running until its error frame is flushed; any other
    /// stops now.
    pub fn input_ended<A>(&self, ctx: &mut Context<A>)
    where
        A: Actor<Context = Context<A>>,
    {
        if self.phase != P::CLOSING {
            ctx.stop();
        }
    }

    /// For `WriteHandler::error`: logs the failure and stops the session.
    pub fn write_failed(&self, err: &ProtocolError) -> Running {
        warn!(self.log, "{} connection write failed", Out::PEER; "error" => %err);
        Running::Stop
    }
}

//! Feeds arbitrary bytes to the frame decoder for every message type a
//! coordinator or worker decodes. Any panic is a bug: decoding must end in
//! a frame, "need more bytes", or a typed error.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use taskyard_protocol::{
    ClientMessage, CoordinatorToClient, CoordinatorToWorker, FrameCodec, WorkerMessage,
};
use tokio_util::codec::Decoder;

fn drain<T: serde::de::DeserializeOwned>(data: &[u8]) {
    let mut codec = FrameCodec::<T, T>::new(64 * 1024);
    let mut buf = BytesMut::from(data);
    while let Ok(Some(_)) = codec.decode(&mut buf) {}
    let _ = codec.decode_eof(&mut buf);
}

fuzz_target!(|data: &[u8]| {
    drain::<ClientMessage>(data);
    drain::<WorkerMessage>(data);
    drain::<CoordinatorToClient>(data);
    drain::<CoordinatorToWorker>(data);
});

//! What keeps a coordinator safe to expose: shared-secret tokens, TLS, the
//! host names the HTTP listener answers to (against DNS rebinding), and
//! the checks that refuse an insecure configuration.

pub mod secret;
pub mod tls;

pub use secret::Secret;

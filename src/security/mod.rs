//! What keeps a coordinator safe to expose: shared-secret tokens, TLS, and
//! the checks that refuse an insecure configuration.

pub mod secret;
pub mod tls;

pub use secret::Secret;

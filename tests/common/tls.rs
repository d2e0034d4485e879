//! TLS material for tests.

use std::path::{Path, PathBuf};

/// A CA, and a certificate for `localhost` signed by it, as PEM files.
pub fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    certificates_for(dir, &["localhost"])
}

/// A CA, and a certificate for `names` (host names or IP addresses)
/// signed by it, as PEM files: (CA, certificate, key).
pub fn certificates_for(dir: &Path, names: &[&str]) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().expect("ca key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("ca");
    let key = KeyPair::generate().expect("key");
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let params = CertificateParams::new(names).expect("params");
    let cert = params.signed_by(&key, &ca, &ca_key).expect("cert");
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca.pem()).expect("write ca");
    std::fs::write(&paths.1, cert.pem()).expect("write cert");
    std::fs::write(&paths.2, key.serialize_pem()).expect("write key");
    paths
}

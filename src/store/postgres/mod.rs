//! The PostgreSQL backend of `Store`, and a throwaway cluster for tests and
//! benchmarks (`throwaway`).

pub mod throwaway;

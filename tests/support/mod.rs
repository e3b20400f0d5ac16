//! Support code shared by the e2e test modules (and, by path, the benches).
pub mod apiserver;
